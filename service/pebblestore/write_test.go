//go:build !js && !wasip1

package pebblestore

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lease-fence/lease-fence/service"
)

// previousState writes a state of format whose fence mark is 7 and whose
// entries are live and rel, each as enc encodes it, and returns its
// directory and its database, still open.
func previousState(t *testing.T, format string, enc func(service.Entry) []byte) (dir string, db *pebble.DB, live, rel service.Entry) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "state")
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	live = entry("a", 5, now+500)
	rel = service.Entry{Resource: "c", Released: []service.Release{{RequestID: "r", HolderID: "h", Fence: 4, At: now - 10, SecretHash: live.SecretHash}}}
	for k, v := range map[string]string{"meta/format": format, "meta/fence-mark": "7"} {
		_ = db.Set([]byte(k), []byte(v), nil)
	}
	for _, e := range []service.Entry{live, rel} {
		_ = db.Set([]byte(leasePrefix+e.Resource), enc(e), nil)
	}
	return dir, db, live, rel
}

// TestPreviousFormatIsRewritten: a state in the previous format (entries
// as JSON) is read as strictly, and its first write rewrites it in the
// current format.
func TestPreviousFormatIsRewritten(t *testing.T) {
	dir, db, live, rel := previousState(t, formatJSON, func(e service.Entry) []byte {
		v, _ := service.EncodeEntry(e)
		return v
	})
	// First with a damaged entry (an unknown member): refused as strictly as
	// before, and left as it was.
	v, _ := service.EncodeEntry(live)
	_ = db.Set([]byte(leasePrefix+"x"), append([]byte(`{"owner2":"o",`), v[1:]...), nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), `the entry of "x" is damaged`) {
		t.Fatalf("a damaged entry of format 2: %v", err)
	}
	if after := files(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatal("the refused state's files were changed")
	}
	rawSet(leasePrefix+"x", nil)(t, dir)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Load(ctx); st.Mark != 7 || !reflect.DeepEqual(st.Entries, []service.Entry{live, rel}) {
		t.Fatalf("read %+v", st)
	}
	if err := s.Write(ctx, service.Batch{Put: []service.Entry{entry("b", 6, now+500)}}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"meta/format", "lease/a", "lease/b", "lease/c"} {
		v, closer, err := db.Get([]byte(k))
		if err != nil {
			t.Fatal(k, err)
		}
		if k == "meta/format" && string(v) != Format || k != "meta/format" && v[0] != service.EntryBinaryVersion {
			t.Fatalf("%s is %q after the first write", k, v)
		}
		closer.Close()
	}
	db.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, _ := s.Load(ctx); len(st.Entries) != 3 || !reflect.DeepEqual(st.Entries[0], live) || !reflect.DeepEqual(st.Entries[2], rel) {
		t.Fatalf("reopened: %+v", st)
	}
}

// TestPreviousEntryLayoutIsRead: a state of the previous version (format
// 3, entries in layout version 1, without values and revocations) opens
// as it is, and keeps working: a changed entry is written in the current
// layout, with its value and revocation, and both layouts are read back
// after a restart.
func TestPreviousEntryLayoutIsRead(t *testing.T) {
	dir, db, live, rel := previousState(t, Format, func(e service.Entry) []byte { return service.AppendEntryBinaryV1(nil, &e) })
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Load(ctx); st.Mark != 7 || !reflect.DeepEqual(st.Entries, []service.Entry{live, rel}) {
		t.Fatalf("read %+v", st)
	}
	b := entry("b", 6, now+500)
	b.Value = "leader at 10.0.0.1"
	b.Revoked = service.Revocation{HolderID: "old", Fence: 3, At: now - 1}
	if err := s.Write(ctx, service.Batch{Put: []service.Entry{b}}, true); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	defer s.Close()
	if st, _ := s.Load(ctx); !reflect.DeepEqual(st.Entries, []service.Entry{live, b, rel}) {
		t.Fatalf("reopened: %+v", st)
	}
}

// TestUnsyncedWrites: a write without a sync waits in memory; the next
// synced write, of any key, takes it into its batch (a newer change of the
// same key replacing it), and otherwise it reaches Pebble's log after
// pendingDelay; so each survives a kill -9 of the process once a synced
// write came after it or the delay has passed.
func TestUnsyncedWrites(t *testing.T) {
	if os.Getenv("PEBBLESTORE_UNSYNCED") == "1" { // the child: write, then wait for the kill
		s, dir := created(t, Options{})
		write := func(b service.Batch, sync bool) {
			if err := s.Write(ctx, b, sync); err != nil {
				t.Fatal(err)
			}
		}
		write(service.Batch{Mark: 100}, true)
		write(service.Batch{Put: []service.Entry{entry("a", 1, now), entry("b", 2, now), entry("c", 3, now)}}, true)
		// a released, then granted again (synced): the grant wins.
		write(service.Batch{Put: []service.Entry{{Resource: "a", LastFence: 1}}}, false)
		write(service.Batch{Put: []service.Entry{entry("a", 4, now)}}, true)
		// b released, then d granted: b's release goes with d's grant.
		write(service.Batch{Delete: []string{"b"}}, false)
		write(service.Batch{Put: []service.Entry{entry("d", 5, now)}}, true)
		// c released, and nothing after it: written after pendingDelay.
		write(service.Batch{Put: []service.Entry{{Resource: "c", LastFence: 3}}}, false)
		for deadline := time.Now().Add(30 * time.Second); ; {
			s.w.mu.Lock()
			n := len(s.w.pending)
			s.w.mu.Unlock()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the pending write was never written")
			}
			time.Sleep(time.Millisecond)
		}
		// The timer's flush took them under s.use's read lock, which it
		// holds until its sync is done: handed to Pebble, they may still be
		// in its log writer's buffer, which a kill loses.
		s.use.Lock()
		//lint:ignore SA2001 waiting for the flush to let go is the point
		s.use.Unlock()
		fmt.Println(dir)
		select {}
	}
	dir := killedChild(t, "TestUnsyncedWrites", "PEBBLESTORE_UNSYNCED=1")
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ := s.Load(ctx)
	want := []service.Entry{entry("a", 4, now), {Resource: "c", LastFence: 3}, entry("d", 5, now)}
	if st.Mark != 100 || !reflect.DeepEqual(st.Entries, want) {
		t.Fatalf("after the kill: mark %d, %+v\nwant %+v", st.Mark, st.Entries, want)
	}
}

// TestSyncedWritesAreGathered: synced writes that come while a sync is under
// way are committed together, in one batch and one sync; and the next group
// waits for as many writes as the last one answered (plus those that came
// meanwhile) before it is written, so writers that come back one after the
// other still share one sync.
func TestSyncedWritesAreGathered(t *testing.T) {
	fs := &gateFS{FS: vfs.Default, release: make(chan struct{})}
	s, dir := created(t, Options{FS: fs})
	if err := s.Write(ctx, service.Batch{Mark: 100}, true); err != nil { // alone: opens the log
		t.Fatal(err)
	}
	queued := func() int {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		return len(s.w.queue)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d syncs, %d writes queued", what, fs.syncs.Load(), queued())
			}
		}
	}
	const n = 64
	var wg sync.WaitGroup
	write := func(name string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Write(ctx, service.Batch{Put: []service.Entry{entry(name, 1, 1)}}, true); err != nil {
				t.Error(err)
			}
		}()
	}
	// 1. n writes at once, the first one's sync held until the others
	// wait for it: two syncs.
	fs.syncs.Store(0)
	fs.hold.Store(true)
	for i := range n {
		write("a" + strconv.Itoa(i))
	}
	waitFor("the first sync and n-1 writes behind it", func() bool { return fs.syncs.Load() == 1 && queued() == n-1 })
	fs.hold.Store(false)
	close(fs.release)
	wg.Wait()
	if got := fs.syncs.Load(); got != 2 {
		t.Fatalf("%d writes at once made %d syncs of the log, want 2 (the first, then the %d that came meanwhile)", n, got, n-1)
	}
	// 2. n-1 writes one after the other: the group waits for all of them
	// (as many as the last group answered), here as long as it takes, so
	// that the test does not depend on timing; then one sync.
	s.w.mu.Lock()
	s.w.minWait, s.w.maxWait, s.w.bound = time.Hour, time.Hour, time.Hour
	s.w.mu.Unlock()
	fs.syncs.Store(0)
	for i := range n - 1 {
		write("b" + strconv.Itoa(i))
		waitFor("the write to queue", func() bool { return queued() == i+1 || fs.syncs.Load() > 0 })
	}
	wg.Wait()
	if got := fs.syncs.Load(); got != 1 {
		t.Fatalf("%d writes one after the other made %d syncs of the log, want 1", n-1, got)
	}
	s = reopen(t, s, dir)
	defer s.Close()
	if st, _ := s.Load(ctx); len(st.Entries) != 2*n-1 || st.Mark != 100 {
		t.Fatalf("%d entries after %d writes, mark %d", len(st.Entries), 2*n-1, st.Mark)
	}
}

// gateFS counts the syncs of write-ahead logs and, while hold is set,
// makes them wait for release.
type gateFS struct {
	vfs.FS
	syncs   atomic.Int32
	hold    atomic.Bool
	release chan struct{}
}

func (g *gateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gateFile{File: f, fs: g}, nil
}

func (g *gateFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return f, err
	}
	return &gateFile{File: f, fs: g}, nil
}

type gateFile struct {
	vfs.File
	fs *gateFS
}

func (f *gateFile) Sync() error {
	f.fs.syncs.Add(1)
	if f.fs.hold.Load() {
		<-f.fs.release
	}
	return f.File.Sync()
}

func (f *gateFile) SyncData() error { return f.Sync() }
