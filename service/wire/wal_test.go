//go:build !js && !wasip1

package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// crashCopy copies the database and the log of the open store b into a new
// directory, as a kill -9 would leave them (every write b made is in the
// files; no checkpoint runs during the copy), and returns the copy's path.
func crashCopy(t *testing.T, b *BoltStore) string {
	t.Helper()
	b.ckMu.Lock()
	defer b.ckMu.Unlock()
	dst := filepath.Join(t.TempDir(), "state.db")
	for _, p := range [][2]string{{b.path, dst}, {walPath(b.path), walPath(dst)}} {
		data, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// loadPath opens path and loads it.
func loadPath(t *testing.T, path string) (Stored, error) {
	t.Helper()
	b, err := OpenBoltStore(path)
	if err != nil {
		return Stored{}, err
	}
	defer b.Close()
	return b.Load(context.Background())
}

func recordNames(st Stored) []string {
	var out []string
	for _, r := range st.Records {
		out = append(out, r.Resource)
	}
	slices.Sort(out)
	return out
}

// TestLogReplay: what was written to the log but not yet into the database
// when the process died is there after opening, and the log goes on from
// where it ended.
func TestLogReplay(t *testing.T) {
	ctx := context.Background()
	b, err := CreateBoltStore(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.ckMu.Lock() // no checkpoint: everything stays in the log only
	for i, name := range []string{"a", "b"} {
		f := uint64(i + 1)
		if err := b.Apply(ctx, Change{IssuedFence: f, Put: []Record{testRecord(name, f, 5000)}}); err != nil {
			t.Fatal(err)
		}
	}
	rel := Release{RequestID: "rel-a", Resource: "a", HolderID: "holder-a", Fence: 1, SecretHash: testRecord("a", 1, 0).SecretHash, At: 100}
	if err := b.ApplyLater(Change{IssuedFence: 2, Delete: []string{"a"}, Released: []Release{rel}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(ctx, Change{IssuedFence: 3, Put: []Record{testRecord("c", 3, 5000)}}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	frames := len(b.pending)
	b.mu.Unlock()
	b.ckMu.Unlock()
	if frames == 0 {
		t.Fatal("nothing pending in the log")
	}
	// Reads see the log's changes before any checkpoint.
	if _, ok, _ := b.Get(ctx, "a"); ok {
		t.Fatal("a released record is still read")
	}
	if r, ok, _ := b.Get(ctx, "c"); !ok || r != testRecord("c", 3, 5000) {
		t.Fatalf("get c: %+v %v", r, ok)
	}
	if names, _ := b.Expired(ctx, 5000, 10); len(names) != 2 {
		t.Fatalf("expired: %v", names)
	}
	if ids, _ := b.Forgettable(ctx, 100, 10); len(ids) != 1 || ids[0] != "rel-a" {
		t.Fatalf("forgettable: %v", ids)
	}
	copyPath := crashCopy(t, b)
	st, err := loadPath(t, copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.IssuedFence != 3 || !slices.Equal(recordNames(st), []string{"b", "c"}) || len(st.Released) != 1 || st.Released[0] != rel {
		t.Fatalf("after replaying %d frames: %+v", frames, st)
	}
	// The replayed copy keeps logging after its last frame.
	c, err := OpenBoltStore(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Apply(ctx, Change{IssuedFence: 4, Put: []Record{testRecord("d", 4, 5000)}}); err != nil {
		t.Fatal(err)
	}
	st, err = loadPath(t, crashCopy(t, c))
	if err != nil || st.IssuedFence != 4 || !slices.Equal(recordNames(st), []string{"b", "c", "d"}) {
		t.Fatalf("after a second crash: %+v %v", st, err)
	}
}

// TestLogWrapsAround: with a small ring, concurrent writers go around it
// many times (checkpoints free its space); a crash copy at any point
// replays to exactly what was acknowledged.
func TestLogWrapsAround(t *testing.T) {
	ring, frame := walRingSize, maxFrame
	walRingSize, maxFrame = 64<<10, 8<<10
	defer func() { walRingSize, maxFrame = ring, frame }()
	ctx := context.Background()
	b, err := CreateBoltStore(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const writers, perPhase, phases = 8, 60, 10
	want := map[string]Record{}
	var fence uint64
	wraps := 0
	for phase := range phases {
		b.mu.Lock()
		head := b.head
		b.mu.Unlock()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perPhase {
					name := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i%7)
					mu.Lock()
					fence++
					f := fence
					mu.Unlock()
					r := testRecord(name, f, float64(phase*1000+i))
					if err := b.Apply(ctx, Change{IssuedFence: f, Put: []Record{r}}); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if i%5 == 4 {
						if err := b.ApplyLater(Change{IssuedFence: f, Delete: []string{name}}); err != nil {
							t.Error(err)
						}
						delete(want, name)
					} else {
						want[name] = r
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// One more grant, so the queued deletions are written before it.
		fence++
		last := testRecord("last", fence, 1)
		want["last"] = last
		if err := b.Apply(ctx, Change{IssuedFence: fence, Put: []Record{last}}); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		if b.head < head {
			wraps++
		}
		b.mu.Unlock()
		st, err := loadPath(t, crashCopy(t, b))
		if err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
		got := map[string]Record{}
		for _, r := range st.Records {
			got[r.Resource] = r
		}
		if st.IssuedFence != fence || len(got) != len(want) {
			t.Fatalf("phase %d: mark %d (want %d), %d records (want %d)", phase, st.IssuedFence, fence, len(got), len(want))
		}
		for k, r := range want {
			if got[k] != r {
				t.Fatalf("phase %d: %s is %+v, want %+v", phase, k, got[k], r)
			}
		}
	}
	if wraps < 2 {
		t.Fatalf("the log went around its ring %d times", wraps)
	}
}

// logWithFrames makes a state whose log holds three frames the database
// does not: a at fence 1, b at 2, c at 3. It returns the path and the ring
// offsets of the frames.
func logWithFrames(t *testing.T) (string, []int64) {
	t.Helper()
	ctx := context.Background()
	b, err := CreateBoltStore(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.ckMu.Lock()
	for i, name := range []string{"a", "b", "c"} {
		f := uint64(i + 1)
		if err := b.Apply(ctx, Change{IssuedFence: f, Put: []Record{testRecord(name, f, 5000)}}); err != nil {
			b.ckMu.Unlock()
			t.Fatal(err)
		}
	}
	var pos []int64
	b.mu.Lock()
	for _, fr := range b.pending {
		pos = append(pos, fr.pos)
	}
	b.mu.Unlock()
	b.ckMu.Unlock()
	if len(pos) != 3 {
		t.Fatalf("%d frames", len(pos))
	}
	return crashCopy(t, b), pos
}

// rewriteFrame writes a frame numbered seq with payload at ring offset pos
// of the log data.
func rewriteFrame(data []byte, pos int64, seq uint64, payload []byte) {
	fr := appendFrame(nil, seq, payload)
	copy(data[walHeaderSize+pos:], fr)
}

// TestDamagedLogIsRefused damages the log (or the database's record of it)
// one way at a time: each is refused with a message naming the problem and
// both files are left as they were. A last frame cut short (what a crash
// in the middle of its write leaves; it was never acknowledged) is not
// damage: the log ends before it.
func TestDamagedLogIsRefused(t *testing.T) {
	flip := func(frame int, at int64) func(t *testing.T, path string, pos []int64) {
		return func(t *testing.T, path string, pos []int64) {
			editFile(t, walPath(path), func(d []byte) []byte { d[walHeaderSize+pos[frame]+at] ^= 0x40; return d })
		}
	}
	other := filepath.Join(t.TempDir(), "other.db")
	ob, err := CreateBoltStore(other)
	if err != nil {
		t.Fatal(err)
	}
	ob.Close()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, pos []int64)
		want   string // "" : accepted, with only a and b
	}{
		{"log deleted", func(t *testing.T, path string, _ []int64) { os.Remove(walPath(path)) }, "does not exist"},
		{"log header damaged", func(t *testing.T, path string, _ []int64) {
			editFile(t, walPath(path), func(d []byte) []byte { d[21] ^= 1; return d })
		}, "damaged header"},
		{"log emptied", func(t *testing.T, path string, _ []int64) {
			editFile(t, walPath(path), func([]byte) []byte { return nil })
		}, "not a lease-fence log"},
		{"log truncated", func(t *testing.T, path string, _ []int64) {
			editFile(t, walPath(path), func(d []byte) []byte { return d[:walHeaderSize+4096] })
		}, "is truncated"},
		{"log of another database", func(t *testing.T, path string, _ []int64) {
			data, _ := os.ReadFile(walPath(other))
			editFile(t, walPath(path), func([]byte) []byte { return data })
		}, "belongs to another state database"},
		{"first frame damaged", flip(0, frameHeader+3), "frame 1 is missing or unreadable, but frame 2 after it is intact"},
		{"middle frame damaged", flip(1, frameHeader+3), "frame 2 is missing or unreadable, but frame 3 after it is intact"},
		{"middle frame's length damaged", flip(1, 5), "frame 2 is missing or unreadable, but frame 3"},
		{"middle frame's number damaged", flip(1, 15), "frame 2 is missing or unreadable, but frame 3"},
		// Frames rewritten with a valid checksum and their length kept.
		{"frame that does not decode", func(t *testing.T, path string, pos []int64) {
			p := encodeChanges(nil, []Change{{IssuedFence: 2, Put: []Record{testRecord("b", 2, 5000)}}})
			p[0] = 2 // two changes, where there is one
			editFile(t, walPath(path), func(d []byte) []byte { rewriteFrame(d, pos[1], 2, p); return d })
		}, "does not decode"},
		{"frame with a damaged record", func(t *testing.T, path string, pos []int64) {
			r := testRecord("b", 2, 5000)
			r.SecretHash = [32]byte{}
			p := encodeChanges(nil, []Change{{IssuedFence: 2, Put: []Record{r}}})
			editFile(t, walPath(path), func(d []byte) []byte { rewriteFrame(d, pos[1], 2, p); return d })
		}, "has no secret hash"},
		{"frame with a fence above the mark", func(t *testing.T, path string, pos []int64) {
			p := encodeChanges(nil, []Change{{IssuedFence: 1, Put: []Record{testRecord("b", 9, 5000)}}})
			editFile(t, walPath(path), func(d []byte) []byte { rewriteFrame(d, pos[1], 2, p); return d })
		}, "above the high-water mark"},
		{"checkpoint outside the log", func(t *testing.T, path string, _ []int64) {
			damage(t, path, putRaw("meta", "logPos", binary.BigEndian.AppendUint64(nil, 1<<40)))
		}, "outside the log"},
		{"log id deleted from the database", func(t *testing.T, path string, _ []int64) {
			damage(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyLogID) })
		}, "log id is missing"},
		{"checkpoint deleted from the database", func(t *testing.T, path string, _ []int64) {
			damage(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyLogSeq) })
		}, "checkpoint is missing"},
		{"database of format v1", func(t *testing.T, path string, _ []int64) {
			damage(t, path, putRaw("meta", "format", formatV1))
		}, "from before the write-ahead log"},
		{"last frame cut short", func(t *testing.T, path string, pos []int64) {
			editFile(t, walPath(path), func(d []byte) []byte { clear(d[walHeaderSize+pos[2]+frameHeader+10:]); return d })
		}, ""},
		{"last frame never written", func(t *testing.T, path string, pos []int64) {
			editFile(t, walPath(path), func(d []byte) []byte { clear(d[walHeaderSize+pos[2]:]); return d })
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, pos := logWithFrames(t)
			tc.damage(t, path, pos)
			db, _ := os.ReadFile(path)
			log, _ := os.ReadFile(walPath(path))
			st, err := loadPath(t, path)
			if tc.want == "" {
				if err != nil || st.IssuedFence != 2 || !slices.Equal(recordNames(st), []string{"a", "b"}) {
					t.Fatalf("a log whose last frame was cut short: %+v %v", st, err)
				}
				return
			}
			if err == nil {
				t.Fatal("a damaged log was accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			db2, _ := os.ReadFile(path)
			log2, _ := os.ReadFile(walPath(path))
			if !bytes.Equal(db, db2) || !bytes.Equal(log, log2) {
				t.Fatal("the refused state was changed")
			}
		})
	}
	// Undamaged, all three frames are replayed.
	path, _ := logWithFrames(t)
	if st, err := loadPath(t, path); err != nil || st.IssuedFence != 3 || !slices.Equal(recordNames(st), []string{"a", "b", "c"}) {
		t.Fatalf("undamaged: %+v %v", st, err)
	}
}

func editFile(t *testing.T, path string, fn func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSplitFramesPayloads: each frame's payload is encodeChanges of its
// group, every frame fits, and the changes come out whole and in order
// (a large sweep's split into parts).
func TestSplitFramesPayloads(t *testing.T) {
	frame := maxFrame
	maxFrame = 8 << 10
	defer func() { maxFrame = frame }()
	var cs []Change
	for i := range 200 {
		name := "res-" + strconv.Itoa(i)
		cs = append(cs, Change{IssuedFence: uint64(i + 1), Put: []Record{testRecord(name, uint64(i+1), 5000)}})
	}
	var sweep Change
	for i := range 1300 {
		sweep.Delete = append(sweep.Delete, "old-"+strconv.Itoa(i))
	}
	cs = append(cs, sweep, Change{IssuedFence: 200, Delete: []string{"res-1"}})
	groups, payloads, err := splitFrames(cs)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) < 3 || len(groups) != len(payloads) {
		t.Fatalf("%d groups, %d payloads", len(groups), len(payloads))
	}
	var deletes, puts int
	for i, g := range groups {
		if !bytes.Equal(payloads[i], encodeChanges(nil, g)) {
			t.Fatalf("frame %d: payload is not encodeChanges of its group", i)
		}
		if len(payloads[i]) > maxFrame-frameHeader {
			t.Fatalf("frame %d: %d bytes", i, len(payloads[i]))
		}
		back, err := decodeChanges(payloads[i])
		if err != nil || len(back) != len(g) {
			t.Fatalf("frame %d decodes to %d changes (%v)", i, len(back), err)
		}
		for _, c := range g {
			puts += len(c.Put)
			deletes += len(c.Delete)
		}
	}
	if puts != 200 || deletes != 1301 {
		t.Fatalf("%d puts, %d deletes", puts, deletes)
	}
}
