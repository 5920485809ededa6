package benchkit

import (
	"time"

	"github.com/prometheus/procfs"
)

// tick is a clock tick of /proc's utime and stime (USER_HZ, 100 on Linux).
const tick = 10 * time.Millisecond

// procCPU is utime + stime of a process's /proc stat.
func procCPU(s procfs.ProcStat) time.Duration { return time.Duration(s.UTime+s.STime) * tick }

// PidCPU is the CPU time (user + system) process pid has used, from /proc.
func PidCPU(pid int) (time.Duration, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	s, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return procCPU(s), nil
}

// GroupCPU is the CPU time (user + system) of the processes of process
// group pgid that still run (a server with the processes it started).
func GroupCPU(pgid int) (time.Duration, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, p := range procs {
		if s, err := p.Stat(); err == nil && s.PGRP == pgid { // else gone meanwhile, or another group's
			total += procCPU(s)
		}
	}
	return total, nil
}

// eachThread calls f with each thread of process pid.
func eachThread(pid int, f func(procfs.Proc)) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return
	}
	threads, err := fs.AllThreads(pid)
	if err != nil {
		return
	}
	for _, t := range threads {
		f(t)
	}
}

// ThreadCPU is the CPU time process pid used so far, the sum over its
// threads of schedstat's first field (nanoseconds on a CPU): finer than
// PidCPU's ticks.
func ThreadCPU(pid int) time.Duration {
	var total time.Duration
	eachThread(pid, func(t procfs.Proc) {
		if s, err := t.Schedstat(); err == nil { // else the thread ended meanwhile
			total += time.Duration(s.RunningNanoseconds)
		}
	})
	return total
}

// Switches is how many times the threads of process pid went off a CPU
// so far (voluntary_ctxt_switches and nonvoluntary_ctxt_switches summed
// over its threads; threads that ended drop out of the sum).
func Switches(pid int) int64 {
	var total int64
	eachThread(pid, func(t procfs.Proc) {
		if s, err := t.NewStatus(); err == nil {
			total += int64(s.VoluntaryCtxtSwitches + s.NonVoluntaryCtxtSwitches)
		}
	})
	return total
}
