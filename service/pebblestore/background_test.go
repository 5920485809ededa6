//go:build !js && !wasip1

package pebblestore

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// tablesFS refuses to create tables (ENOSPC) while full is set: the
// engine's flushes fail, its log writes do not.
type tablesFS struct {
	vfs.FS
	full atomic.Bool
}

func (f *tablesFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full.Load() && strings.HasSuffix(name, ".sst") {
		return nil, syscall.ENOSPC
	}
	return f.FS.Create(name, c)
}

// TestFailedFlushesBackOff: flushes the disk refuses are tried again after
// a pause that doubles up to backoffMax (Pebble alone tries again at
// once); while they fail the store refuses changes (Ready says why: the
// disk is full) and the log gets one line when they start, at most one a
// minute while they last, and one when they end. Time is the test's: each
// pause advances its clock, and the disk gets room after ten minutes of
// them.
func TestFailedFlushesBackOff(t *testing.T) {
	fs := &tablesFS{FS: vfs.Default}
	var logs syncio.Buffer
	var clock atomic.Int64 // nanoseconds since start
	start := time.Now()
	var pauses []time.Duration
	var notReady []string
	var s *Store
	bg := &background{log: slog.New(slog.NewTextHandler(&logs, nil)), now: func() time.Time { return start.Add(time.Duration(clock.Load())) }}
	bg.sleep = func(d time.Duration) {
		pauses = append(pauses, d) // called by one flush at a time
		if err := s.Ready(context.Background()); err != nil {
			notReady = append(notReady, err.Error())
		}
		if clock.Add(int64(d)) >= int64(10*time.Minute) {
			fs.full.Store(false)
		}
	}
	s, _ = created(t, Options{FS: fs, bg: bg, Logger: bg.log})
	defer s.Close()
	if err := s.Write(ctx, service.Batch{Put: []service.Entry{entry("a", 1, 1)}}, true); err != nil {
		t.Fatal(err)
	}
	fs.full.Store(true)
	// SaveMark flushes: it returns once a flush worked.
	if err := s.SaveMark(ctx, 1024); err != nil {
		t.Fatal(err)
	}
	if len(pauses) < 10 || pauses[0] != backoffMin || pauses[1] != 2*backoffMin || pauses[len(pauses)-1] != backoffMax {
		t.Fatalf("pauses %v", pauses)
	}
	if len(notReady) != len(pauses) || !strings.Contains(notReady[0], "disk full") || !strings.Contains(notReady[0], "no space left on device") {
		t.Fatalf("while the flushes failed, Ready said %q", notReady)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("once a flush worked: %v", err)
	}
	out := logs.String()
	lines := strings.Count(out, "\n")
	if strings.Count(out, "background writes fail") != 1 || strings.Count(out, "background writes work again") != 1 ||
		lines > 2+int(time.Duration(clock.Load())/logEvery)+1 || strings.Count(out, "still fail") < 5 {
		t.Fatalf("%d flushes failed over %v of pauses; the log (%d lines):\n%s", len(pauses), time.Duration(clock.Load()), lines, out)
	}
	t.Logf("%d failed flushes over %v of pauses, %d log lines", len(pauses), time.Duration(clock.Load()), lines)
}
