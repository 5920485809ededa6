//go:build !js

package benchkit

import (
	"time"

	"github.com/prometheus/procfs"

	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// PGCPU is the CPU time of pg's processes: the postmaster with the
// processes it started that ended (its cutime and cstime) and those that
// still run (each backend is a session of its own); 0 if pg is nil or gone.
func PGCPU(pg *pgtest.Server) time.Duration {
	if pg == nil {
		return 0
	}
	pid, err := pg.Pid()
	if err != nil {
		return 0
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	s, err := p.Stat()
	if err != nil {
		return 0
	}
	total := procCPU(s) + time.Duration(s.CUTime+s.CSTime)*tick
	kids, _ := pg.Children()
	for kid := range kids {
		if t, err := PidCPU(kid); err == nil { // else it ended meanwhile
			total += t
		}
	}
	return total
}
