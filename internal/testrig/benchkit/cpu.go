package benchkit

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
)

// stat is the fields of /proc/PID/stat after the command's name (the
// first is the state, field 3).
func stat(pid string) ([]string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 > len(data) {
		return nil, errors.New("/proc/" + pid + "/stat is not as expected")
	}
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 13 {
		return nil, errors.New("/proc/" + pid + "/stat is not as expected")
	}
	return f, nil
}

// ticks is utime + stime (fields 14 and 15) of stat's fields, in clock
// ticks (USER_HZ, 100 on Linux).
func ticks(f []string) (time.Duration, error) {
	var t int64
	for _, k := range []int{11, 12} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, err
		}
		t += v
	}
	return time.Duration(t) * 10 * time.Millisecond, nil
}

// PidCPU is the CPU time (user + system) process pid has used, from /proc.
func PidCPU(pid int) (time.Duration, error) {
	f, err := stat(strconv.Itoa(pid))
	if err != nil {
		return 0, err
	}
	return ticks(f)
}

// GroupCPU is the CPU time (user + system) of the processes of process
// group pgid that still run (a server with the processes it started).
func GroupCPU(pgid int) (time.Duration, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		f, err := stat(d.Name())
		if err != nil || f[2] != strconv.Itoa(pgid) { // gone meanwhile, or another group's
			continue
		}
		t, err := ticks(f)
		if err != nil {
			return 0, err
		}
		total += t
	}
	return total, nil
}

// eachThread calls f with the text of /proc/PID/task/TID/file for each
// thread of process pid.
func eachThread(pid int, file string, f func(string)) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, t := range tasks {
		if data, err := os.ReadFile(dir + "/" + t.Name() + "/" + file); err == nil { // else the thread ended meanwhile
			f(string(data))
		}
	}
}

// ThreadCPU is the CPU time process pid used so far, the sum over its
// threads of schedstat's first field (nanoseconds on a CPU): finer than
// PidCPU's ticks.
func ThreadCPU(pid int) time.Duration {
	var total time.Duration
	eachThread(pid, "schedstat", func(data string) {
		if f := strings.Fields(data); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(n)
		}
	})
	return total
}

// Switches is how many times the threads of process pid went off a CPU
// so far (voluntary_ctxt_switches and nonvoluntary_ctxt_switches summed
// over its threads; threads that ended drop out of the sum).
func Switches(pid int) int64 {
	var total int64
	eachThread(pid, "status", func(data string) {
		for _, line := range strings.Split(data, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				total += n
			}
		}
	})
	return total
}
