//go:build !js && !wasip1

package wire

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// stored reads the record of resource and the release of requestID from
// what is durable (the database, after a checkpoint of the log), bypassing
// the queue.
func stored(t *testing.T, b *BoltStore, resource, requestID string) (rec Record, has, released bool) {
	t.Helper()
	if err := b.checkpoint(); err != nil {
		t.Fatal(err)
	}
	err := b.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketLeases).Get([]byte(resource)); v != nil {
			var err error
			rec, err = decodeRecord([]byte(resource), v)
			has = err == nil
			if err != nil {
				return err
			}
		}
		released = tx.Bucket(bucketReleased).Get([]byte(requestID)) != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec, has, released
}

func hasRelease(cs []Change) bool {
	for _, c := range cs {
		if len(c.Released) > 0 {
			return true
		}
	}
	return false
}

// TestReleaseAnsweredBeforeItsCommit: on a BoltStore a release is answered
// while its transaction is still held back; from then on the record is gone
// for the service, but the database still has it; an acquisition of the
// resource by someone else is answered only once a transaction holding the
// release (written first) is durable.
func TestReleaseAnsweredBeforeItsCommit(t *testing.T) {
	store, err := CreateBoltStore(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var hold atomic.Bool
	entered := make(chan struct{}, 1)
	unblock := make(chan struct{})
	var mu sync.Mutex
	var batches [][]Change
	store.beforeWrite = func(cs []Change) error {
		mu.Lock()
		batches = append(batches, cs)
		mu.Unlock()
		if hold.Load() && hasRelease(cs) {
			entered <- struct{}{}
			<-unblock
		}
		return nil
	}
	r := newRig(t, store)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	hold.Store(true)
	if st, out := r.post(OpRelease, releaseMsg("q2", "deploy", "a", f, secret)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	// Answered, and the transaction with the release is not written: it
	// is held in beforeWrite until unblock is closed.
	<-entered
	if rec, has, rel := stored(t, store, "deploy", "q2"); !has || rec.HolderID != "a" || rec.Fence != f || rel {
		t.Fatalf("the release was written before it was let through: %+v %v %v", rec, has, rel)
	}
	if _, ok, err := store.Get(context.Background(), "deploy"); ok || err != nil {
		t.Fatalf("Get finds the released record: %v %v", ok, err)
	}
	// A retry of the release is answered ok from memory, before the write.
	if st, out := r.post(OpRelease, releaseMsg("q2", "deploy", "a", f, secret)); st != 200 || out["ok"] != true {
		t.Fatalf("retried release: %d %v", st, out)
	}
	type answer struct {
		st  int
		out map[string]any
	}
	got := make(chan answer, 1)
	go func() {
		st, out := r.post(OpAcquire, acquireMsg("q3", "deploy", "b"))
		got <- answer{st, out}
	}()
	select {
	case a := <-got:
		t.Fatalf("a grant was answered before the release before it was written: %d %v", a.st, a.out)
	default:
	}
	close(unblock)
	a := <-got
	f2, _ := grantOf(t, a.st, a.out)
	if f2 <= f {
		t.Fatalf("fence %d after %d", f2, f)
	}
	rec, has, rel := stored(t, store, "deploy", "q2")
	if !has || rec.HolderID != "b" || rec.Fence != f2 || !rel {
		t.Fatalf("after the grant: %+v %v, release stored %v", rec, has, rel)
	}
	// The release went into a transaction no later than the grant's.
	mu.Lock()
	defer mu.Unlock()
	relAt, grantAt := -1, -1
	for i, cs := range batches {
		for _, c := range cs {
			if len(c.Released) > 0 && c.Released[0].RequestID == "q2" && relAt < 0 {
				relAt = i
			}
			if len(c.Put) > 0 && c.Put[0].Fence == f2 {
				grantAt = i
			}
		}
	}
	if relAt < 0 || grantAt < relAt {
		t.Fatalf("release in transaction %d, grant in %d", relAt, grantAt)
	}
	if r.svc.Records() != 1 {
		t.Fatalf("%d records counted", r.svc.Records())
	}
}

// TestFailedReleaseWriteIsRetried: a release answered ok whose transaction
// fails stays queued; while it cannot be written no later change is made
// durable (grants are refused 503, the database keeps the released lease,
// held by its holder); once writes work again it is written before (or
// with) the next grant.
func TestFailedReleaseWriteIsRetried(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	store, err := CreateBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	var failed atomic.Int64
	disk := errors.New("disk full")
	store.beforeWrite = func(cs []Change) error {
		if failing.Load() {
			failed.Add(1)
			return disk
		}
		return nil
	}
	r := newRig(t, store)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	failing.Store(true)
	if st, out := r.post(OpRelease, releaseMsg("q2", "deploy", "a", f, secret)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	for _, m := range []Message{acquireMsg("q3", "deploy", "b"), acquireMsg("q4", "other", "c")} {
		if st, out := r.post(OpAcquire, m); st != 503 || errCodeOf(t, out) != CodeUnavailable {
			t.Fatalf("acquire %s with the release unwritten: %d %v", m.Request.Resource, st, out)
		}
	}
	if failed.Load() < 2 {
		t.Fatalf("%d failed writes", failed.Load())
	}
	if rec, has, rel := stored(t, store, "deploy", "q2"); !has || rec.HolderID != "a" || rec.Fence != f || rel {
		t.Fatalf("the database after failed writes: %+v %v %v", rec, has, rel)
	}
	if _, has, _ := stored(t, store, "other", ""); has {
		t.Fatal("a failed grant was stored")
	}
	failing.Store(false)
	f2, _ := r.grant(OpAcquire, acquireMsg("q5", "deploy", "b"))
	if f2 <= f {
		t.Fatalf("fence %d after %d", f2, f)
	}
	if rec, has, rel := stored(t, store, "deploy", "q2"); !has || rec.HolderID != "b" || rec.Fence != f2 || !rel {
		t.Fatalf("after writes recovered: %+v %v %v", rec, has, rel)
	}
	if r.svc.Records() != 1 {
		t.Fatalf("%d records counted", r.svc.Records())
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, err = OpenBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st, err := store.Load(context.Background())
	if err != nil || len(st.Records) != 1 || st.Records[0].HolderID != "b" || len(st.Released) != 1 || st.IssuedFence < f2 {
		t.Fatalf("reopened: %+v %v", st, err)
	}
}

// TestCloseWritesOrDropsQueuedReleases: Close writes a release still
// queued; over a failing disk it drops it, and the reopened database holds
// the lease as before the release (what a crash would leave).
func TestCloseWritesOrDropsQueuedReleases(t *testing.T) {
	for _, fail := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "state.db")
		store, err := CreateBoltStore(path)
		if err != nil {
			t.Fatal(err)
		}
		var failing atomic.Bool
		store.beforeWrite = func([]Change) error {
			if failing.Load() {
				return errors.New("disk gone")
			}
			return nil
		}
		r := newRig(t, store)
		f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
		failing.Store(fail)
		if st, out := r.post(OpRelease, releaseMsg("q2", "deploy", "a", f, secret)); st != 200 || out["ok"] != true {
			t.Fatalf("release: %d %v", st, out)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		if err := store.ApplyLater(Change{Delete: []string{"x"}}); err == nil {
			t.Fatal("ApplyLater after Close")
		}
		store, err = OpenBoltStore(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Load(context.Background())
		store.Close()
		if err != nil {
			t.Fatal(err)
		}
		if fail {
			if len(st.Records) != 1 || st.Records[0].HolderID != "a" || st.Records[0].Fence != f || len(st.Released) != 0 {
				t.Fatalf("dropped release: %+v", st)
			}
		} else if len(st.Records) != 0 || len(st.Released) != 1 {
			t.Fatalf("queued release not written by Close: %+v", st)
		}
	}
}

func TestApplyLaterRefusesPut(t *testing.T) {
	store, err := CreateBoltStore(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.ApplyLater(Change{IssuedFence: 1, Put: []Record{testRecord("a", 1, 5)}}); err == nil {
		t.Fatal("ApplyLater took a Put")
	}
	if _, ok, _ := store.Get(context.Background(), "a"); ok {
		t.Fatal("stored")
	}
}
