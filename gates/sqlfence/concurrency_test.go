//go:build !js

package sqlfence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// counts is what one writer saw.
type counts struct {
	Attempts, Landed, Refused, Other int
	Errors                           []string
}

func (c *counts) add(o counts) {
	c.Attempts += o.Attempts
	c.Landed += o.Landed
	c.Refused += o.Refused
	c.Other += o.Other
	c.Errors = append(c.Errors, o.Errors...)
}

// writeLoop commits n random fences to one resource through s. Fences drift
// upwards with jitter, so writers overtake each other and many commits are
// refused.
func writeLoop(ctx context.Context, b *backend, s *sqlfence.Store, holder string, seed uint64, n int) counts {
	rng := rand.New(rand.NewPCG(seed, 11))
	var c counts
	for i := range n {
		tk := fence.Token{Resource: "ledger", HolderID: holder, Fence: uint64(1 + i + rng.IntN(12))}
		c.Attempts++
		err := s.Commit(ctx, tk, insertWrite(b, tk))
		var se *fence.StaleFenceError
		switch {
		case err == nil:
			c.Landed++
		case errors.As(err, &se):
			if se.RefusedFence != tk.Fence || se.RefusedHolderID != holder || se.AdmittedFence <= tk.Fence {
				c.Other++
				c.Errors = append(c.Errors, fmt.Sprintf("bad refusal %+v for %v", se.Rejection, tk))
				continue
			}
			c.Refused++
		default:
			c.Other++
			c.Errors = append(c.Errors, err.Error())
		}
	}
	return c
}

// checkHistory checks what the database holds after writers with the given
// totals: rows in commit order carry non-decreasing fences, every refusal is
// in Rejections (sequence 1..n, each below the floor it met, which is a fence
// that landed or was admitted), and landed + refused + other = attempts.
func checkHistory(t *testing.T, db *sql.DB, s *sqlfence.Store, total counts) {
	t.Helper()
	if total.Other != 0 {
		t.Errorf("%d commits failed with other errors: %v", total.Other, total.Errors[:min(5, len(total.Errors))])
	}
	if total.Landed+total.Refused+total.Other != total.Attempts {
		t.Fatalf("%d landed + %d refused + %d other != %d attempts", total.Landed, total.Refused, total.Other, total.Attempts)
	}
	rows := readWrites(t, db, "ledger")
	if len(rows) != total.Landed {
		t.Fatalf("%d rows written, %d commits reported landed", len(rows), total.Landed)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].fence < rows[i-1].fence {
			t.Fatalf("row %d has fence %d after a row with fence %d", i, rows[i].fence, rows[i-1].fence)
		}
	}
	rej, err := s.Rejections(context.Background(), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if len(rej) != total.Refused {
		t.Fatalf("%d rejections logged, %d commits refused", len(rej), total.Refused)
	}
	landedFences := map[uint64]bool{}
	for _, r := range rows {
		landedFences[r.fence] = true
	}
	for i, r := range rej {
		if r.Seq != uint64(i+1) || r.RefusedFence >= r.AdmittedFence || !landedFences[r.AdmittedFence] || r.AdmittedHolderID == "" {
			t.Fatalf("rejection %d = %+v", i, r)
		}
	}
	floor, err := s.Floor(context.Background(), "ledger")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) > 0 && floor != rows[len(rows)-1].fence {
		t.Fatalf("floor %d, last row's fence %d", floor, rows[len(rows)-1].fence)
	}
	if total.Refused == 0 || total.Landed == 0 {
		t.Fatalf("%d landed, %d refused: the writers never contended", total.Landed, total.Refused)
	}
	t.Logf("%d attempts: %d landed, %d refused", total.Attempts, total.Landed, total.Refused)
}

// Many goroutines, over several *sql.DB handles on one database, commit
// random fences to one resource.
func TestConcurrentWriters(t *testing.T) {
	const writers, perWriter = 8, 30
	forEach(t, func(t *testing.T, b *backend) {
		setup := b.open(t)
		createWrites(t, b, setup)
		var stores []*sqlfence.Store
		for range 3 {
			stores = append(stores, open(t, b, b.open(t)))
		}
		var mu sync.Mutex
		var total counts
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := writeLoop(context.Background(), b, stores[w%len(stores)], "w"+strconv.Itoa(w), uint64(w), perWriter)
				mu.Lock()
				total.add(c)
				mu.Unlock()
			}()
		}
		wg.Wait()
		checkHistory(t, setup, stores[0], total)
	})
}

// Two OS processes (this test binary, re-run as a writer) commit random
// fences to one resource in the same SQLite file, while goroutines of this
// process do too.
func TestTwoProcessesSQLite(t *testing.T) {
	b := newSQLite(t)
	db, s := openWithWrites(t, b)
	const perWriter = 60
	var children []*exec.Cmd
	var outs []*bufio.Reader
	for i := range 2 {
		cmd := childCmd(t, "write", b, strconv.Itoa(100+i), strconv.Itoa(perWriter))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, cmd)
		outs = append(outs, bufio.NewReader(out))
	}
	total := writeLoop(context.Background(), b, s, "parent", 7, perWriter)
	for i, cmd := range children {
		var c counts
		if err := json.NewDecoder(outs[i]).Decode(&c); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if c.Attempts != perWriter {
			t.Fatalf("writer %d made %d attempts", i, c.Attempts)
		}
		total.add(c)
	}
	checkHistory(t, db, s, total)
}

// A writer process killed with SIGKILL in the middle of its transaction,
// after its own statement ran and the floor was raised inside the
// transaction, leaves no partial write and does not move the floor; the
// next commit goes through.
func TestKilledWriterLeavesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		db, s := openWithWrites(t, b)
		ctx := context.Background()
		mustWrite(t, b, s, tok("a", 3))
		cmd := childCmd(t, "hang", b, "0", "0")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := cmd.StdinPipe() // never closed before the kill: the child blocks on it
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "inside\n" {
			_ = cmd.Process.Kill()
			t.Fatalf("child said %q, %v", line, err)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die of SIGKILL: %v", err)
		}
		// The next commit waits for the database to let go of the dead
		// writer's lock, then goes through.
		mustWrite(t, b, s, tok("b", 4))
		rows := readWrites(t, db, "ledger")
		if len(rows) != 2 || rows[0] != (written{"a", 3}) || rows[1] != (written{"b", 4}) {
			t.Fatalf("rows after the kill: %v", rows)
		}
		// The killed writer had fence 50: had its raise survived, fence 4
		// would have been refused.
		if f, _ := s.Floor(ctx, "ledger"); f != 4 {
			t.Fatalf("floor = %d", f)
		}
		if r, _ := s.Rejections(ctx, "ledger"); len(r) != 0 {
			t.Fatalf("rejections = %v", r)
		}
		t.Logf("killed writer (fence 50, row inserted, floor raised in its transaction): no row, floor %d", 4)
	})
}

const childEnv = "SQLFENCE_TEST_CHILD"

func childCmd(t *testing.T, mode string, b *backend, seed, n string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "SQLFENCE_DRIVER="+b.driver, "SQLFENCE_DSN="+b.dsn,
		"SQLFENCE_DIALECT="+strconv.Itoa(int(b.dialect)), "SQLFENCE_SEED="+seed, "SQLFENCE_N="+n)
	cmd.Stderr = os.Stderr
	return cmd
}

// child is the writer process: "write" runs writeLoop and prints its counts
// as JSON; "hang" starts a commit with fence 50, inserts its row, says
// "inside" and blocks until it is killed.
func child(mode string) int {
	driver, dsn := os.Getenv("SQLFENCE_DRIVER"), os.Getenv("SQLFENCE_DSN")
	d, _ := strconv.Atoi(os.Getenv("SQLFENCE_DIALECT"))
	b := &backend{dialect: sqlfence.Dialect(d)}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	ctx := context.Background()
	s, err := sqlfence.Open(ctx, db, sqlfence.Options{Dialect: b.dialect})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "write":
		seed, _ := strconv.ParseUint(os.Getenv("SQLFENCE_SEED"), 10, 64)
		n, _ := strconv.Atoi(os.Getenv("SQLFENCE_N"))
		c := writeLoop(ctx, b, s, "proc"+os.Getenv("SQLFENCE_SEED"), seed, n)
		if err := json.NewEncoder(os.Stdout).Encode(c); err != nil {
			return 1
		}
		return 0
	case "hang":
		tk := tok("killed", 50)
		err := s.Commit(ctx, tk, func(ctx context.Context, tx *sql.Tx) error {
			if err := insertWrite(b, tk)(ctx, tx); err != nil {
				return err
			}
			fmt.Println("inside")
			_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
			return errors.New("stdin closed before the kill")
		})
		fmt.Fprintln(os.Stderr, "hang: commit returned", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}
