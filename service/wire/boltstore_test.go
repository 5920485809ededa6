//go:build !js && !wasip1

package wire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lease-fence/lease-fence/core/clock"
)

func testRecord(resource string, fence uint64, expiresAt float64) Record {
	return Record{Resource: resource, HolderID: "holder-" + resource, RequestID: "req-" + resource, Fence: fence,
		ExpiresAt: expiresAt, SecretHash: sha256.Sum256([]byte("secret-" + resource))}
}

func TestBoltStoreCreateOpenRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	if _, err := OpenBoltStore(path); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("opened a missing path: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("opening a missing path created it")
	}
	b, err := CreateBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	st, err := b.Load(ctx)
	if err != nil || st.IssuedFence != 0 || len(st.Records) != 0 {
		t.Fatalf("fresh: %+v %v", st, err)
	}
	if err := b.Apply(ctx, Change{IssuedFence: 3, Put: []Record{testRecord("a", 2, 5000), testRecord("b", 3, 6000)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, Change{IssuedFence: 1, Delete: []string{"a"}}); err != nil { // a lower mark never lowers it
		t.Fatal(err)
	}
	// A record above the mark is refused, and nothing of that change lands.
	if err := b.Apply(ctx, Change{IssuedFence: 3, Put: []Record{testRecord("c", 4, 1)}}); err == nil {
		t.Fatal("a fence above the mark was stored")
	}
	names, err := b.Expired(ctx, 6000, 10)
	if err != nil || len(names) != 1 || names[0] != "b" {
		t.Fatalf("expired: %v %v", names, err)
	}
	if names, _ := b.Expired(ctx, 5999, 10); len(names) != 0 {
		t.Fatalf("expired before its time: %v", names)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateBoltStore(path); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("created over an existing state: %v", err)
	}
	b, err = OpenBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err = b.Load(ctx)
	if err != nil || st.IssuedFence != 3 || len(st.Records) != 1 || st.Records[0] != testRecord("b", 3, 6000) {
		t.Fatalf("after reopening: %+v %v", st, err)
	}
	if r, ok, err := b.Get(ctx, "b"); !ok || err != nil || r != testRecord("b", 3, 6000) {
		t.Fatalf("get: %+v %v %v", r, ok, err)
	}
	if _, ok, err := b.Get(ctx, "a"); ok || err != nil {
		t.Fatalf("deleted record: %v %v", ok, err)
	}
	// Releases: kept until forgotten, and only forgotten once old enough.
	rel := Release{RequestID: "rel-1", Resource: "b", HolderID: "h", Fence: 3, SecretHash: sha256.Sum256([]byte("secret-rel")), At: 100}
	if err := b.Apply(ctx, Change{Released: []Release{rel}}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := b.Forgettable(ctx, 99, 10); len(ids) != 0 {
		t.Fatalf("forgettable too early: %v", ids)
	}
	if ids, _ := b.Forgettable(ctx, 100, 10); len(ids) != 1 || ids[0] != "rel-1" {
		t.Fatalf("forgettable: %v", ids)
	}
	if err := b.Apply(ctx, Change{Forget: []string{"rel-1"}, ForgetBefore: 99}); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Load(ctx); len(st.Released) != 1 || st.Released[0] != rel {
		t.Fatalf("a release newer than ForgetBefore was dropped: %+v", st.Released)
	}
	if err := b.Apply(ctx, Change{Forget: []string{"rel-1"}, ForgetBefore: 100}); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Load(ctx); len(st.Released) != 0 {
		t.Fatalf("not forgotten: %+v", st.Released)
	}
	// The secret itself is nowhere in the files, only its hash.
	for _, p := range []string{path, walPath(path)} {
		data, _ := os.ReadFile(p)
		if bytes.Contains(data, []byte("secret-b")) {
			t.Fatalf("a secret is stored in plain text in %s", p)
		}
	}
}

// TestBoltStoreGroupCommit: concurrent applies all become durable, and
// share transactions.
func TestBoltStoreGroupCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := CreateBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := uint64(i + 1)
			if err := b.Apply(ctx, Change{IssuedFence: f, Put: []Record{testRecord("r"+strconv.Itoa(i), f, 1)}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b.mu.Lock()
	frames := b.nextSeq - 1
	b.mu.Unlock()
	b.Close()
	b, err = OpenBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Load(ctx)
	if err != nil || st.IssuedFence != n || len(st.Records) != n {
		t.Fatalf("after %d concurrent applies: mark %d, %d records, %v", n, st.IssuedFence, len(st.Records), err)
	}
	t.Logf("%d applies in %d log frames", n, frames)
}

// damage opens the database at path directly and changes it with fn.
func damage(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func putRaw(bucket, key string, value []byte) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put([]byte(key), value) }
}

// TestDamagedDatabaseIsRefused builds a valid state, damages it one way at a
// time, and checks that the store (or the service, for instants) refuses it
// with a message naming the problem, and leaves the file as it was.
func TestDamagedDatabaseIsRefused(t *testing.T) {
	const now = 1_000_000.0 // the service's clock in this test
	good := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "state.db")
		b, err := CreateBoltStore(path)
		if err != nil {
			t.Fatal(err)
		}
		err = b.Apply(context.Background(), Change{IssuedFence: 7, Put: []Record{testRecord("a", 5, now+500), testRecord("b", 7, now-500)},
			Released: []Release{{RequestID: "rel-1", Resource: "c", HolderID: "h", Fence: 6, SecretHash: sha256.Sum256([]byte("s")), At: now - 100}}})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		return path
	}
	rec := func(mut func(b []byte) []byte) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			l := tx.Bucket(bucketLeases)
			v := append([]byte(nil), l.Get([]byte("a"))...)
			return l.Put([]byte("a"), mut(v))
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(tx *bolt.Tx) error // nil: file-level damage in file
		file   func(data []byte) []byte
		want   string
	}{
		{name: "meta bucket deleted", damage: func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketMeta) }, want: "meta bucket is missing"},
		{name: "leases bucket deleted", damage: func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketLeases) }, want: "leases bucket is missing"},
		{name: "high-water mark deleted", damage: func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyIssued) }, want: "high-water mark is missing"},
		{name: "high-water mark too short", damage: putRaw("meta", "issuedFence", []byte{7}), want: "has 1 bytes"},
		{name: "high-water mark lowered", damage: putRaw("meta", "issuedFence", binary.BigEndian.AppendUint64(nil, 6)), want: "above the high-water mark 6"},
		{name: "high-water mark zeroed", damage: putRaw("meta", "issuedFence", make([]byte, 8)), want: "above the high-water mark 0"},
		{name: "format changed", damage: putRaw("meta", "format", []byte("something else")), want: "unknown format"},
		{name: "unknown meta key", damage: putRaw("meta", "startFence", []byte("1")), want: "unexpected meta key"},
		{name: "unknown bucket", damage: func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("extra")); return err }, want: "unexpected buckets"},
		{name: "nested bucket in leases", damage: func(tx *bolt.Tx) error { _, err := tx.Bucket(bucketLeases).CreateBucket([]byte("n")); return err }, want: "nested bucket"},
		{name: "record emptied", damage: putRaw("leases", "a", []byte{}), want: "is damaged (0 bytes)"},
		{name: "record truncated", damage: rec(func(b []byte) []byte { return b[:30] }), want: "is damaged"},
		{name: "record cut in its ids", damage: rec(func(b []byte) []byte { return b[:len(b)-3] }), want: "damaged (request id)"},
		{name: "record with trailing bytes", damage: rec(func(b []byte) []byte { return append(b, 0) }), want: "trailing bytes"},
		{name: "record of another version", damage: rec(func(b []byte) []byte { b[0] = 9; return b }), want: "is damaged"},
		{name: "record with fence 0", damage: rec(func(b []byte) []byte { binary.BigEndian.PutUint64(b[1:9], 0); return b }), want: "has fence 0"},
		{name: "record above the mark", damage: rec(func(b []byte) []byte { binary.BigEndian.PutUint64(b[1:9], 8); return b }), want: "above the high-water mark 7"},
		{name: "record with NaN expiry", damage: rec(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[9:17], math.Float64bits(math.NaN()))
			return b
		}), want: "non-finite expiry"},
		{name: "record with no secret hash", damage: rec(func(b []byte) []byte { clear(b[17:49]); return b }), want: "no secret hash"},
		{name: "record with no holder", damage: func(tx *bolt.Tx) error {
			r := testRecord("a", 5, now+500)
			r.HolderID = ""
			return tx.Bucket(bucketLeases).Put([]byte("a"), encodeRecord(r))
		}, want: "has no holder"},
		{name: "record from the future", damage: func(tx *bolt.Tx) error {
			return tx.Bucket(bucketLeases).Put([]byte("a"), encodeRecord(testRecord("a", 5, now+1e300)))
		}, want: "an instant from the future"},
		{name: "record just over one TTL ahead", damage: func(tx *bolt.Tx) error {
			return tx.Bucket(bucketLeases).Put([]byte("a"), encodeRecord(testRecord("a", 5, now+1000.5)))
		}, want: "an instant from the future"},
		{name: "released bucket deleted", damage: func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketReleased) }, want: "released bucket is missing"},
		{name: "release damaged", damage: putRaw("released", "rel-1", []byte{1, 2, 3}), want: "the release \"rel-1\" is damaged"},
		{name: "release above the mark", damage: func(tx *bolt.Tx) error {
			return tx.Bucket(bucketReleased).Put([]byte("rel-2"), encodeRelease(Release{RequestID: "rel-2", Resource: "c", HolderID: "h", Fence: 9,
				SecretHash: sha256.Sum256([]byte("s")), At: now}))
		}, want: "not from 1 to the high-water mark 7"},
		{name: "release from the future", damage: func(tx *bolt.Tx) error {
			return tx.Bucket(bucketReleased).Put([]byte("rel-1"), encodeRelease(Release{RequestID: "rel-1", Resource: "c", HolderID: "h", Fence: 6,
				SecretHash: sha256.Sum256([]byte("s")), At: now + 5000}))
		}, want: "an instant from the future"},
		{name: "file truncated", file: func(d []byte) []byte { return d[:len(d)/3] }, want: "cannot be opened"},
		{name: "file emptied", file: func([]byte) []byte { return nil }, want: "cannot be opened"},
		{name: "file overwritten", file: func(d []byte) []byte { return bytes.Repeat([]byte("garbage!"), len(d)/8) }, want: "cannot be opened"},
		{name: "meta pages zeroed", file: func(d []byte) []byte { clear(d[:2*4096]); return d }, want: "cannot be opened"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := good(t)
			if tc.damage != nil {
				damage(t, path, tc.damage)
			} else {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, tc.file(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(path)
			err := openAndLoad(t, path, now)
			if err == nil {
				t.Fatal("a damaged state was accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if tc.damage != nil && !errors.Is(err, ErrInconsistent) {
				t.Fatalf("error %v is not ErrInconsistent", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the refused state file was changed")
			}
		})
	}
	// The undamaged state loads, with only the live lease restored.
	if err := openAndLoad(t, good(t), now); err != nil {
		t.Fatal(err)
	}
}

// openAndLoad opens path and loads it into a service whose clock reads now
// and whose TTL is 1s.
func openAndLoad(t *testing.T, path string, now float64) error {
	t.Helper()
	b, err := OpenBoltStore(path)
	if err != nil {
		return err
	}
	defer b.Close()
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: now})
	svc, err := NewService(ServiceConfig{Clock: clk, TTL: time.Second, Store: b})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background()); err != nil {
		// Every call is refused the same way.
		if _, cerr := svc.Call(context.Background(), acquireMsg("q", "z", "h")); cerr == nil {
			t.Fatal("a service that refused its state answered a call")
		}
		return err
	}
	if svc.Records() != 2 {
		t.Fatalf("%d records", svc.Records())
	}
	return nil
}
