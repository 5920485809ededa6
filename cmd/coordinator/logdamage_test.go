//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/serverproc"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pebblestore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// TestLogDamageNeverReissuesFences: a coordinator is killed with SIGKILL
// right after its first grants of a run (the first fences after the
// stored mark, made while the log that holds them is the newest), and
// that newest log is then damaged: deleted, emptied, cut to one byte, cut
// inside its first record, one byte flipped in that record's header, one
// in its payload (each started as a child process), and bytes of its
// first 4 KiB flipped, one at a time (each byte of the records and of the
// 64 after them, then every 64th; each opened in this process, on a copy
// in memory). A start may refuse the state or lose the grants, but no
// start may grant a fence at or below one acknowledged before the kill.
func TestLogDamageNeverReissuesFences(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	hc := &http.Client{}
	acquire := func(srv *child, id, res, holder string) uint64 {
		t.Helper()
		st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, id, res, holder, 0))
		if st != 200 || !r.OK {
			t.Fatalf("acquire %s: %d %+v", res, st, r)
		}
		return r.Grant.Fence
	}
	srv := startChild(t, "", "-init", "-state", state, "-ttl", "1h")
	acked := acquire(srv, "first", "first", "holder-a")
	srv.kill()
	srv = startChild(t, "", "-state", state, "-ttl", "1h")
	for i, h := range []string{"holder-b", "holder-c", "holder-d", "holder-e"} {
		f := acquire(srv, "run2-"+strconv.Itoa(i), "res-"+h, h)
		if f <= acked {
			t.Fatalf("fence %d after %d", f, acked)
		}
		acked = f
	}
	srv.kill()
	files := readState(t, state)
	newest := newestLog(files)
	if newest == "" {
		t.Fatalf("no log in %v", slices.Collect(maps.Keys(files)))
	}
	log := files[newest]
	end := len(log)
	for end > 0 && log[end-1] == 0 {
		end--
	}
	t.Logf("acknowledged fences up to %d; the newest log %s holds %d bytes of records", acked, newest, end)
	if end < 64 {
		t.Fatalf("the newest log holds %d bytes, not the grants", end)
	}

	// The six damages, each started as a coordinator.
	const header = 11 // a record's header in Pebble's recyclable log format
	// Each damage but the deleted log is said in one warning, which names the
	// log and the offset where its reading stopped.
	damages := []struct {
		name   string
		damage func(path string) error
		warn   string // what the warning says was found
	}{
		{"left as the kill left it", func(string) error { return nil }, ""},
		{"deleted", os.Remove, ""},
		{"emptied", func(p string) error { return os.Truncate(p, 0) }, "the log has 0 bytes"},
		{"cut to one byte", func(p string) error { return os.Truncate(p, 1) }, "the log has 1 bytes"},
		{"cut inside its first record", func(p string) error { return os.Truncate(p, header+20) }, "a record of this log at offset 0"},
		{"a byte of the record's header flipped", flipAt(2), "a record of this log at offset 0"},
		{"a byte of the record's payload flipped", flipAt(header + 12), "a record of this log at offset 0"},
	}
	const warning = "the state's log was read only up to a damaged or cut record"
	for _, d := range damages {
		dir := filepath.Join(t.TempDir(), "state")
		writeState(t, dir, files)
		if err := d.damage(filepath.Join(dir, newest)); err != nil {
			t.Fatal(err)
		}
		srv, logs := tryChild(t, "-state", dir, "-ttl", "1h")
		if srv == nil {
			t.Logf("%s: the start was refused: %s", d.name, strings.TrimSpace(logs.String()))
			continue
		}
		// holder-c's resource is still held by it (its grant was kept) or
		// granted anew; a new resource is granted.
		f := acquire(srv, "new-"+d.name, "new", "stranger")
		if st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "stranger-"+d.name, "res-holder-c", "stranger", 0)); st == 200 && r.OK {
			f = min(f, r.Grant.Fence)
		} else if st != 200 || r.HeldBy != "holder-c" {
			t.Fatalf("%s: holder-c's resource: %d %+v", d.name, st, r)
		}
		srv.kill() // its log is all written once it has exited
		switch n := strings.Count(logs.String(), warning); {
		case d.warn == "" && n != 0, d.warn != "" && n != 1:
			t.Errorf("%s: %d warnings of the log's replay:\n%s", d.name, n, logs.String())
		case d.warn != "" && (!strings.Contains(logs.String(), "file="+filepath.Join(dir, newest)+" offset=0") || !strings.Contains(logs.String(), d.warn)):
			t.Errorf("%s: the warning does not name the log, the offset and %q:\n%s", d.name, d.warn, logs.String())
		}
		if f <= acked {
			t.Errorf("%s: a start granted fence %d, at or below %d, acknowledged before the kill", d.name, f, acked)
		} else {
			t.Logf("%s: started, next fence %d", d.name, f)
		}
	}

	// A log put in the state by hand after the newest one (here a copy of
	// its first 100 bytes) makes the newest one a log that must end
	// cleanly, which one cut by a kill does not: the start is refused in
	// one line that names both and says what to do.
	dir := filepath.Join(t.TempDir(), "state")
	writeState(t, dir, files)
	if err := os.WriteFile(filepath.Join(dir, "999999.log"), log[:100], 0o600); err != nil {
		t.Fatal(err)
	}
	msg := refusedStart(t, "-state", dir, "-ttl", "1h")
	if _, last, _ := strings.Cut(msg, "coordinator: "); !strings.Contains(last, "its log "+filepath.Join(dir, newest)+" cannot be read past offset") ||
		!strings.Contains(last, "newer logs follow it (999999.log)") || !strings.Contains(last, "move it out of the state") || strings.Count(strings.TrimSpace(last), "\n") != 0 {
		t.Errorf("with a log put in by hand: %q", msg)
	}

	// Bytes of the first 4 KiB flipped, one at a time, opened in this
	// process on a copy in memory (the whole start, the writes aside, is
	// what the six damages above run): each byte of the records and of the
	// 64 after them (where the next record's header would be), then every
	// 64th byte. Past the records a flip is in bytes a start reads as one
	// tail (it starts above the mark, or with Pebble's invariants, built
	// in with -race, refuses the state), whichever byte it is.
	const span = 4096
	var offsets []int
	for off := range min(span, len(log)) {
		if off < end+64 || off%64 == 0 {
			offsets = append(offsets, off)
		}
	}
	type outcome struct {
		refused, started int
		reissued         []string
	}
	var (
		mu  sync.Mutex
		out outcome
		wg  sync.WaitGroup
	)
	next := make(chan int)
	for range max(2, runtime.GOMAXPROCS(0)) {
		m, err := newMemState(files, newest)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range next {
				if err := m.flip(int64(off)); err != nil {
					t.Error(err)
					continue
				}
				f, err := m.start()
				if err := m.flip(int64(off)); err != nil {
					t.Error(err)
				}
				mu.Lock()
				switch {
				case err != nil:
					out.refused++
				case f <= acked:
					out.reissued = append(out.reissued, fmt.Sprintf("byte %d: fence %d", off, f))
				default:
					out.started++
				}
				mu.Unlock()
			}
		}()
	}
	for _, off := range offsets {
		next <- off
	}
	close(next)
	wg.Wait()
	t.Logf("%d flips: %d starts refused, %d started above %d", len(offsets), out.refused, out.started, acked)
	if len(out.reissued) > 0 {
		t.Errorf("%d starts granted a fence at or below %d, acknowledged before the kill: %s",
			len(out.reissued), acked, strings.Join(out.reissued[:min(10, len(out.reissued))], "; "))
	}
}

// memState is a copy in memory of a state directory, on which a worker
// flips one byte of a log at a time and opens the state in Pebble's
// read-only mode (which writes nothing), as a start reads it.
type memState struct {
	fs     vfs.FS
	dir    string
	newest vfs.File
}

func newMemState(files map[string][]byte, newest string) (*memState, error) {
	m := &memState{fs: vfs.NewMem(), dir: "/state"}
	if err := m.fs.MkdirAll(m.dir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range files {
		f, err := m.fs.Create(m.fs.PathJoin(m.dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, err
		}
		_, err = f.Write(data)
		if err = errors.Join(err, f.Close()); err != nil {
			return nil, err
		}
	}
	f, err := m.fs.OpenReadWrite(m.fs.PathJoin(m.dir, newest), vfs.WriteCategoryUnspecified)
	m.newest = f
	return m, err
}

// flip flips the byte at off of the newest log.
func (m *memState) flip(off int64) error {
	b := make([]byte, 1)
	if _, err := m.newest.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0xff
	_, err := m.newest.WriteAt(b, off)
	return err
}

// start opens the state as the coordinator does (a Pebble store, a Local
// with the coordinator's fence reserve; what it would write is dropped,
// so the copy stays as it is) and acquires a new resource: it returns the
// fence granted, or why the start or the grant was refused.
func (m *memState) start() (uint64, error) {
	ps, err := pebblestore.Open(m.dir, pebblestore.Options{FS: m.fs})
	if err != nil {
		return 0, err
	}
	defer ps.Close()
	clk, err := service.WallClock("coordinator")
	if err != nil {
		return 0, err
	}
	l, err := service.NewLocal(service.LocalConfig{Clock: clk, TTL: time.Hour, Persist: readOnly{ps}, FenceReserve: fenceReserve})
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	if err := l.Load(ctx); err != nil {
		return 0, err
	}
	svc, err := service.New(service.Config{TTL: time.Hour, Store: l})
	if err != nil {
		return 0, err
	}
	r, err := svc.Call(ctx, killMsg(wire.OpAcquire, "stranger", "new-resource", "stranger", 0))
	if err != nil {
		return 0, err
	}
	if !r.OK {
		return 0, fmt.Errorf("refused: %+v", r)
	}
	return r.Grant.Fence, nil
}

// readOnly is a Persister that reads what p read and drops every write.
type readOnly struct{ p service.Persister }

func (r readOnly) Load(ctx context.Context) (service.Stored, error) { return r.p.Load(ctx) }
func (readOnly) Write(context.Context, service.Batch, bool) error   { return nil }

// tryChild starts the coordinator with args and returns it once it
// listens (or nil if it exits first), and what it writes to stderr.
func tryChild(t *testing.T, args ...string) (*child, *syncio.Buffer) {
	t.Helper()
	cmd := childCmd(t, "", "", args...)
	stderr := &syncio.Buffer{}
	cmd.Stderr = stderr
	srv, err := serverproc.Start(cmd, false)
	if err != nil {
		return nil, stderr
	}
	c := &child{cmd: cmd, url: srv.URL}
	t.Cleanup(func() { c.kill() })
	return c, stderr
}

// flipAt flips the byte at off of the file at path.
func flipAt(off int64) func(string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			return err
		}
		b[0] ^= 0xff
		_, err = f.WriteAt(b, off)
		return err
	}
}

// readState reads every file of the state directory dir.
func readState(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// writeState writes files into a new state directory dir.
func writeState(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// newestLog names the write-ahead log with the highest number.
func newestLog(files map[string][]byte) string {
	newest, top := "", -1
	for name := range files {
		num, ok := strings.CutSuffix(name, ".log")
		if n, err := strconv.Atoi(num); ok && err == nil && n > top {
			newest, top = name, n
		}
	}
	return newest
}
