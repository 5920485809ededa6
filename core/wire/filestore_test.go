//go:build !js

package wire

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileStoreRestart: a coordinator started over the file a previous one
// wrote issues fences above the last one and remembers the live holder.
func TestFileStoreRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	open := func() *FileStore {
		t.Helper()
		fs, err := OpenFileStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	r := newRig(t, open())
	var last uint64
	var secret string
	for i := 0; i < 3; i++ { // acquire, release, ... fence 3 stays held
		f, s := r.grant(OpAcquire, acquireMsg("a"+string(rune('0'+i)), "deploy", "a"))
		last, secret = f, s
		if i < 2 {
			if st, out := r.post(OpRelease, releaseMsg("r"+string(rune('0'+i)), "deploy", "a", f, s)); st != 200 || out["ok"] != true {
				t.Fatalf("release: %d %v", st, out)
			}
		}
	}
	r.grant(OpAcquire, acquireMsg("o1", "other", "b"))
	if last != 3 {
		t.Fatalf("fence %d", last)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file %v %v", info, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}

	// Restart: same file, a fresh service and clock.
	r2 := newRig(t, open())
	st, out := r2.post(OpAcquire, acquireMsg("b1", "deploy", "b"))
	if st != 200 || out["heldBy"] != "a" {
		t.Fatalf("restarted coordinator forgot the holder: %d %v", st, out)
	}
	if st, out := r2.post(OpRelease, releaseMsg("b2", "deploy", "a", last, "not-it")); st != 403 {
		t.Fatalf("forged release after restart: %d %v", st, out)
	}
	if st, out := r2.post(OpRelease, releaseMsg("a9", "deploy", "a", last, secret)); st != 200 || out["ok"] != true {
		t.Fatalf("holder release after restart: %d %v", st, out)
	}
	if f, _ := r2.grant(OpAcquire, acquireMsg("b3", "deploy", "b")); f != last+1 {
		t.Fatalf("restarted coordinator issued fence %d, want %d", f, last+1)
	}
	if f, _ := r2.grant(OpAcquire, acquireMsg("b4", "fresh", "b")); f != 1 {
		t.Fatalf("new resource fence %d", f)
	}
	// Restart again after expiry: fences still climb; the lease is not
	// resurrected.
	r3 := newRig(t, open())
	r3.clk.Advance(5000)
	if f, _ := r3.grant(OpAcquire, acquireMsg("c1", "deploy", "c")); f != last+2 {
		t.Fatalf("fence %d, want %d", f, last+2)
	}
	if got := open().Resources(); strings.Join(got, ",") != "deploy,fresh,other" {
		t.Fatalf("stored resources %v", got)
	}
}

func TestFileStoreRefusesDamage(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":  "not json",
		"version":  `{"version":2,"resources":{}}`,
		"mismatch": `{"version":1,"resources":{"a":{"resource":"b","issuedFence":3,"lastMillis":0}}}`,
		"unknown":  `{"version":1,"resources":{},"extra":1}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenFileStore(path); err == nil {
			t.Fatalf("%s: opened a damaged file", name)
		}
	}
}

func TestFileStoreWriteFailure(t *testing.T) {
	dir := t.TempDir()
	fs, err := OpenFileStore(filepath.Join(dir, "sub", "state.json")) // sub does not exist
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, fs)
	st, out := r.post(OpAcquire, acquireMsg("q1", "deploy", "a"))
	if st != 503 || errCodeOf(t, out) != CodeUnavailable {
		t.Fatalf("%d %v", st, out)
	}
	if _, ok, _ := fs.Load(context.Background(), "deploy"); ok {
		t.Fatal("a failed save left state in the store")
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if f, _ := r.grant(OpAcquire, acquireMsg("q2", "deploy", "a")); f != 1 {
		t.Fatalf("fence %d after a failed save, want 1", f)
	}
}

// TestFileStoreConcurrentSaves: saves from many goroutines are all durable
// when they return, whether or not they shared a write.
func TestFileStoreConcurrentSaves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	fs, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			name := "r" + string(rune('a'+i))
			errs <- fs.Save(context.Background(), State{Resource: name, IssuedFence: uint64(i + 1)})
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	again, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		st, ok, _ := again.Load(context.Background(), "r"+string(rune('a'+i)))
		if !ok || st.IssuedFence != uint64(i+1) {
			t.Fatalf("resource %d: %+v %v", i, st, ok)
		}
	}
}
