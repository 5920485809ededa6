//go:build linux

// Command bench-cli measures what `lease-fence lock` adds to the start of a
// command, against a coordinator on loopback (out/bin/coordinator -memory):
// the time from the start of the process to the command's exec, and the
// whole run, with three sides run in turn, round after round:
//
//	lock   lease-fence lock bench/r -- MARK
//	plain  MARK
//	flock  flock FILE MARK (the local lock users know; skipped without flock)
//
// MARK is this program started again as a child that prints the wall
// clock (Unix nanoseconds) first thing: "to exec" is that reading minus
// the one taken just before the side's process was started, so it covers
// lease-fence's start, its acquisition and the fork and exec of MARK (and
// MARK's own runtime start, the same in every side). "whole" is until the
// side's process was reaped: lease-fence's release included; "cpu" is the
// user and system time of the side's process and what it waited for
// (MARK included). Each side's
// figures are min / median / max over the rounds, and the lock/plain
// ratio is taken round by round.
//
// Usage, after make lease-fence coordinator:
//
//	go run ./scripts/bench-cli [-rounds 50] [-bin out/bin]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
)

const markEnv = "BENCH_CLI_MARK"

func main() {
	if os.Getenv(markEnv) == "1" {
		fmt.Println(time.Now().UnixNano())
		return
	}
	rounds := flag.Int("rounds", 50, "rounds of the three sides")
	bin := flag.String("bin", "out/bin", "the directory of lease-fence and coordinator")
	flag.Parse()
	if err := run(*rounds, *bin); err != nil {
		benchkit.Fatal(err)
	}
}

func run(rounds int, bin string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	coord, err := benchkit.Start(exec.Command(filepath.Join(bin, "coordinator"), "-addr", "127.0.0.1:0", "-memory", "-quiet"), "", nil, false)
	if err != nil {
		return err
	}
	defer coord.Stop()
	url := coord.URL

	dir, err := os.MkdirTemp("", "bench-cli-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type side struct {
		name string
		argv []string
	}
	sides := []side{
		{"lock", []string{filepath.Join(bin, "lease-fence"), "lock", "--holder", "bench", "bench/r", "--", self}},
		{"plain", []string{self}},
	}
	if fl, err := exec.LookPath("flock"); err == nil {
		sides = append(sides, side{"flock", []string{fl, filepath.Join(dir, "lock"), self}})
	}
	env := append(os.Environ(), markEnv+"=1", "LEASE_FENCE_URL="+url)
	toExec := make([][]time.Duration, len(sides))
	whole := make([][]time.Duration, len(sides))
	cpu := make([][]time.Duration, len(sides))
	for r := -1; r < rounds; r++ { // round -1 warms up
		for i, s := range sides {
			cmd := exec.Command(s.argv[0], s.argv[1:]...)
			cmd.Env = env
			var buf strings.Builder
			cmd.Stdout = &buf
			cmd.Stderr = os.Stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v", s.name, err)
			}
			end := time.Now()
			mark, err := strconv.ParseInt(strings.TrimSpace(buf.String()), 10, 64)
			if err != nil {
				return fmt.Errorf("%s printed %q", s.name, buf.String())
			}
			if r >= 0 {
				toExec[i] = append(toExec[i], time.Duration(mark-start.UnixNano()))
				whole[i] = append(whole[i], end.Sub(start))
				cpu[i] = append(cpu[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
			}
		}
	}
	fmt.Printf("%d rounds, sides in turn; load %s\n", rounds, benchkit.Load())
	fmt.Printf("%-6s %-28s %-28s %-28s\n", "side", "to exec min/median/max", "whole min/median/max", "cpu min/median/max")
	for i, s := range sides {
		fmt.Printf("%-6s %-28s %-28s %-28s\n", s.name, mmm(toExec[i]), mmm(whole[i]), mmm(cpu[i]))
	}
	for j := 1; j < len(sides); j++ {
		var ratio, over []float64
		for r := range toExec[0] {
			ratio = append(ratio, float64(toExec[0][r])/float64(toExec[j][r]))
			over = append(over, float64(toExec[0][r]-toExec[j][r])/float64(time.Millisecond))
		}
		fmt.Printf("lock/%s to exec: ratio %s, lock's extra time %s ms\n", sides[j].name, benchkit.MMM(ratio, "%.2f"), benchkit.MMM(over, "%.2f"))
	}
	return nil
}

func mmm(d []time.Duration) string { return benchkit.MMM(benchkit.Millis(d), "%.2f") + " ms" }
