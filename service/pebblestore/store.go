//go:build !js && !wasip1

// Package pebblestore keeps the coordinator's state on disk, in a Pebble
// database (github.com/cockroachdb/pebble/v2, CockroachDB's storage
// engine): a synced write is one append to Pebble's write-ahead log and one
// fdatasync, shared by the synced writes made at the same time (Write). It
// is the service.Persister of the native server (cmd/coordinator).
//
// A state directory holds three kinds of key: "meta/format" (the format
// name), "meta/fence-mark" (the fence mark, decimal) and "lease/<resource>"
// (the resource's service.Entry in a binary layout, entry.go). Everything is
// checked when the store opens, and anything unexpected is refused with the
// files left as they were (Open reads the directory in Pebble's read-only
// mode first).
package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	crerrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/lease-fence/lease-fence/service"
)

// Format is the value of the "meta/format" key of a state directory.
const Format = "lease-fence state 3"

// formatJSON is the previous format, whose entries are JSON
// (service.EncodeEntry). Such a state is read (as strictly) and rewritten in
// Format at its first write.
const formatJSON = "lease-fence state 2"

var (
	keyFormat = []byte("meta/format")
	keyMark   = []byte("meta/fence-mark")
)

const leasePrefix = "lease/"

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// MinFreeBytes is the free space under which the store refuses writes
	// (so the engine never runs out of room in the middle of one), checked
	// at most every CheckEvery. Zero means 64 MiB and 100 ms.
	MinFreeBytes uint64
	CheckEvery   time.Duration
	// Logger receives the store's failures (once when they start, once when
	// they clear) and Pebble's errors. Nil logs nothing.
	Logger *slog.Logger
	// FS is the file system; nil is the operating system's (tests inject
	// failures through it).
	FS vfs.FS

	warned *sync.Map   // the log replays warned about (pebbleLogger)
	bg     *background // Pebble's background writes (tests set its clock)
}

// Store is a service.Persister in a Pebble database. It is safe for
// concurrent use; concurrent synced writes share their fdatasync.
type Store struct {
	dir    string
	opts   Options
	db     atomic.Pointer[pebble.DB] // nil until the first Write
	mu     sync.Mutex                // guards opening db and closed
	closed bool
	// use is held (read) by every Write and (write) by Close, so a write
	// still running when the store is closed (a call cut off by the end of
	// a drain) finishes first, and one that comes later is refused.
	use  sync.RWMutex
	lock *pebble.Lock
	st   service.Stored // what Open read, for Load
	// upgrade: the state is in the previous format (formatJSON); the first
	// Write rewrites it in this one.
	upgrade bool
	fatal   pebbleLogger

	full    atomic.Bool
	checked atomic.Int64 // when the free space was last checked (UnixNano)

	w writer // the order of the writes, the pending ones, the group commit (write.go)
}

var _ service.Persister = (*Store)(nil)

// Create makes a new, empty state directory at dir (mode 0700; its parent
// must exist) and opens it. It refuses a path that exists.
func Create(dir string, opts Options) (*Store, error) {
	opts.defaults()
	if _, err := opts.FS.Stat(dir); err == nil {
		return nil, fmt.Errorf("pebblestore: the state %s already exists; -init creates a new one only", dir)
	}
	var db *pebble.DB
	err := opts.FS.MkdirAll(dir, 0o700)
	if err == nil {
		db, err = pebble.Open(dir, opts.pebble(&pebble.Options{ErrorIfExists: true, FormatMajorVersion: pebble.FormatNewest}))
	}
	if err == nil {
		b := db.NewBatch()
		_ = b.Set(keyFormat, []byte(Format), nil)
		_ = b.Set(keyMark, []byte("0"), nil)
		err = errors.Join(b.Commit(pebble.Sync), b.Close(), db.Close())
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: creating the state %s: %w", dir, err)
	}
	return Open(dir, opts)
}

// Open opens the state directory at dir, which must exist: a path that
// does not is refused, never created (a mistyped path must not start the
// fences over). It reads and checks everything before it writes anything:
// a directory that another process holds, that is not a Pebble database,
// that Pebble finds damaged, or whose keys are not exactly a state's
// (format, fence mark, entries that decode and pass service.CheckEntry)
// is refused with a message saying why, and its files are left as they
// were.
func Open(dir string, opts Options) (*Store, error) {
	opts.defaults()
	fi, err := opts.FS.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("pebblestore: the state %s does not exist; start once with -init to create it", dir)
	case err != nil:
		return nil, fmt.Errorf("pebblestore: the state %s cannot be opened: %w", dir, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("pebblestore: the state %s cannot be opened: it is not a directory (a state is a directory made by -init)", dir)
	}
	if !isPebble(opts.FS, dir) {
		return nil, fmt.Errorf("pebblestore: the state %s cannot be opened: it holds no Pebble database (no manifest marker)", dir)
	}
	lock, err := pebble.LockDirectory(dir, opts.FS)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return nil, fmt.Errorf("pebblestore: the state %s is held by another process%s; one coordinator per state", dir, holder(opts.FS.PathJoin(dir, "LOCK")))
	} else if err != nil {
		return nil, fmt.Errorf("pebblestore: the state %s cannot be locked: %w", dir, err)
	}
	s := &Store{dir: dir, opts: opts, lock: lock, fatal: pebbleLogger{l: opts.Logger}}
	if err := s.open(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return s, nil
}

// isPebble reports whether dir holds a Pebble database (its manifest
// marker or, in older formats, its CURRENT file), before anything is
// created in it.
func isPebble(fs vfs.FS, dir string) bool {
	names, _ := fs.List(dir)
	for _, n := range names {
		if n == "CURRENT" || strings.HasPrefix(n, "marker.manifest.") {
			return true
		}
	}
	return false
}

// open reads everything in read-only mode. The database is opened for
// writing by the first Write (openRW), so a state the caller refuses after
// Load (service.Local checks every entry) is left exactly as it was too.
func (s *Store) open() error {
	// Damage Pebble finds while the state is read is named in the refusal
	// (one line), not logged on its own.
	var damagedFile string
	po := s.opts.pebble(&pebble.Options{ReadOnly: true, Lock: s.lock, ErrorIfNotExists: true})
	po.EventListener.DataCorruption = func(info pebble.DataCorruptionInfo) {
		if damagedFile == "" {
			damagedFile = info.Path
		}
	}
	ro, err := pebble.Open(s.dir, po)
	if err != nil {
		return s.refusal("cannot be opened", err, damagedFile)
	}
	s.st, s.upgrade, err = read(ro)
	if cerr := ro.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return s.refusal("is refused", err, damagedFile)
	}
	return nil
}

// restoreHint is what the operator can do about a state the engine finds
// damaged.
const restoreHint = "restore the state from a backup (docs/service.md, \"Backups and restoring one\")"

// refusal is the error of a state that could not be read: one line that
// names the damaged file, if Pebble said which, and what to do. err is
// kept for errors.Is.
func (s *Store) refusal(what string, err error, damagedFile string) error {
	msg := strings.ReplaceAll(err.Error(), "\n", ": ")
	if crerrors.Is(err, pebble.ErrDBNotPristine) || crerrors.Is(err, pebble.ErrCorruption) || damagedFile != "" {
		msg = firstLine(err) // the lines after it are the engine's details
	}
	switch {
	case crerrors.Is(err, pebble.ErrDBNotPristine):
		marker := "its format-version marker (marker.format-version.*)"
		if names, _ := s.opts.FS.List(s.dir); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "marker.format-version.") }) {
			marker = "a file Pebble expects"
		}
		msg = marker + " is missing while it holds tables and logs: a file of the state was deleted or the state is damaged (" + msg + "); " + restoreHint
	case crerrors.Is(err, pebble.ErrCorruption) || damagedFile != "":
		file := damagedFile
		if num, off, ok := walAt(err); ok {
			var newer []string
			names, _ := s.opts.FS.List(s.dir)
			slices.Sort(names)
			for _, n := range names {
				if k, isLog := strings.CutSuffix(n, ".log"); isLog {
					if v, err := strconv.ParseUint(k, 10, 64); err == nil && v > num {
						newer = append(newer, n)
					}
				}
			}
			msg = fmt.Sprintf("its log %s cannot be read past offset %s (%s)", s.opts.FS.PathJoin(s.dir, fmt.Sprintf("%06d.log", num)), off, msg)
			if len(newer) > 0 {
				msg += ", and newer logs follow it (" + strings.Join(newer, ", ") + "): a log that is not the newest must end cleanly. If a newer log is not the coordinator's (put there by hand), move it out of the state; otherwise " + restoreHint
			} else {
				msg += "; " + restoreHint
			}
		} else if file != "" {
			msg = "its file " + file + " is damaged (" + msg + "); " + restoreHint
		} else {
			msg = "it is damaged (" + msg + "); " + restoreHint
		}
	case errors.Is(err, service.ErrInconsistent):
		msg += "; " + restoreHint
	}
	return &refused{msg: "pebblestore: the state " + s.dir + " " + what + ": " + msg, err: err}
}

// refused is a refusal: its message is one line; it wraps the engine's
// error.
type refused struct {
	msg string
	err error
}

func (r *refused) Error() string { return r.msg }
func (r *refused) Unwrap() error { return r.err }

// firstLine is err's message up to its first line break (Pebble's errors
// carry details and stack traces on the lines after it).
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// walAt reads, from an error of Pebble's log replay, which log and offset
// it was replaying (the detail "replaying wal N, offset (PATH: O)").
func walAt(err error) (num uint64, offset string, ok bool) {
	for _, d := range crerrors.GetAllDetails(err) {
		if m := replaying.FindStringSubmatch(d); m != nil {
			num, _ = strconv.ParseUint(m[1], 10, 64)
			return num, m[2], true
		}
	}
	return 0, "", false
}

var replaying = regexp.MustCompile(`^replaying wal (\d+), offset \(?(?:[^()]*: )?(\d+)`)

// openRW opens the database for writing, once (Pebble replays its log into
// a table and starts a new log).
func (s *Store) openRW() (*pebble.DB, error) {
	if db := s.db.Load(); db != nil {
		return db, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if db := s.db.Load(); db != nil {
		return db, nil
	}
	if s.closed {
		return nil, errors.New("pebblestore: the store is closed")
	}
	db, err := pebble.Open(s.dir, s.opts.pebble(&pebble.Options{Lock: s.lock, ErrorIfNotExists: true}))
	if err != nil {
		return nil, fmt.Errorf("pebblestore: the state %s cannot be opened for writing: %w", s.dir, err)
	}
	if s.upgrade {
		// Every entry as read (nothing was written since) in this format,
		// and the format key, in one synced batch.
		b := db.NewBatch()
		_ = b.Set(keyFormat, []byte(Format), nil)
		s.encode(b, service.Batch{Put: s.st.Entries})
		if err := errors.Join(b.Commit(pebble.Sync), b.Close()); err != nil {
			db.Close()
			return nil, fmt.Errorf("pebblestore: the state %s cannot be rewritten in the format %q: %w", s.dir, Format, err)
		}
		s.upgrade = false
		s.opts.Logger.Info("the state was rewritten in the current format", "state", s.dir, "from", formatJSON, "to", Format)
	}
	s.db.Store(db)
	return db, nil
}

// read reads and checks every key of db, and reports whether the state is
// in the previous format (formatJSON), whose entries are JSON.
func read(db *pebble.DB) (service.Stored, bool, error) {
	var st service.Stored
	decode, old := service.DecodeEntryBinary, false
	switch v, closer, err := db.Get(keyFormat); {
	case errors.Is(err, pebble.ErrNotFound):
		return st, false, damaged("its format or fence mark is missing: not a lease-fence state, or a damaged one")
	case err != nil:
		return st, false, err
	case string(v) == formatJSON:
		decode, old = service.DecodeEntry, true
		closer.Close()
	case string(v) != Format:
		err = damaged("it has the unknown format " + strconv.Quote(string(v)) + ", not " + strconv.Quote(Format))
		closer.Close()
		return st, false, err
	default:
		closer.Close()
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return st, false, err
	}
	mark := false
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		switch key := string(k); {
		case key == string(keyFormat):
		case key == string(keyMark):
			st.Mark, err = strconv.ParseUint(string(v), 10, 64)
			if err != nil || strconv.FormatUint(st.Mark, 10) != string(v) {
				err = damaged("its fence mark " + strconv.Quote(string(v)) + " is not a number")
			}
			mark = true
		case len(key) > len(leasePrefix) && strings.HasPrefix(key, leasePrefix):
			var e service.Entry
			if e, err = decode(key[len(leasePrefix):], v); err == nil {
				st.Entries = append(st.Entries, e)
			}
		default:
			err = damaged("it holds the unexpected key " + strconv.Quote(key))
		}
		if err != nil {
			break
		}
	}
	err = errors.Join(err, it.Error(), it.Close())
	if err == nil && !mark {
		err = damaged("its format or fence mark is missing: not a lease-fence state, or a damaged one")
	}
	if err != nil && !errors.Is(err, service.ErrInconsistent) {
		err = errors.Join(service.ErrInconsistent, err)
	}
	return st, old, err
}

func damaged(why string) error { return errors.Join(service.ErrInconsistent, errors.New(why)) }

// holder names the process holding the lock file at path (Pebble locks it
// with fcntl, which reports the holder's pid), or "" if it cannot tell.
func holder(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		return ""
	}
	return " (pid " + strconv.Itoa(int(lk.Pid)) + ")"
}

// Load returns what Open read.
func (s *Store) Load(context.Context) (service.Stored, error) { return s.st, nil }

// SaveMark stores the fence mark (service.MarkSaver): a synced write, then
// a flush of Pebble's memtable to a table and the manifest, so the mark
// does not live only in the write-ahead log, whose last block a crash or a
// damaged disk can lose (Pebble then replays the log up to the damage and
// opens without what follows). Whatever happens to the log after SaveMark
// returns, the state opens with this mark or, if it is refused as
// damaged, not at all.
func (s *Store) SaveMark(ctx context.Context, mark uint64) error {
	if err := s.Write(ctx, service.Batch{Mark: mark}, true); err != nil {
		return err
	}
	s.use.RLock()
	defer s.use.RUnlock()
	db := s.db.Load()
	if db == nil || s.w.isShut() {
		return errors.New("pebblestore: the store is closed")
	}
	flushed, err := db.AsyncFlush()
	if err != nil {
		return fmt.Errorf("pebblestore: flushing the fence mark of %s to a table: %w", s.dir, err)
	}
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pebblestore: flushing the fence mark of %s to a table: %w", s.dir, context.Cause(ctx))
	}
}

var _ service.MarkSaver = (*Store)(nil)

// ErrDiskFull is wrapped by the error of a write refused for want of free
// space. The store logs when that starts and when it ends.
var ErrDiskFull = errors.New("pebblestore: disk full")

// Writable reports why writes are refused (too little free space, an error
// wrapping ErrDiskFull), or nil.
// It looks at the free space again if it last did CheckEvery ago, and logs
// each change of the answer.
func (s *Store) Writable() error {
	if last, now := s.checked.Load(), time.Now().UnixNano(); now-last >= int64(s.opts.CheckEvery) && s.checked.CompareAndSwap(last, now) {
		u, err := s.opts.FS.GetDiskUsage(s.dir)
		// Once full, the disk has room again only a margin above the
		// minimum, so a disk near it does not flap between the two.
		floor := s.opts.MinFreeBytes
		if s.full.Load() {
			floor += max(s.opts.MinFreeBytes/4, roomMargin)
		}
		full := err == nil && u.AvailBytes < floor
		if was := s.full.Swap(full); was != full && full {
			s.opts.Logger.Error("disk full: acquisitions and renewals are refused with 503 unavailable until there is room",
				"state", s.dir, "freeBytes", u.AvailBytes, "minFreeBytes", s.opts.MinFreeBytes)
		} else if was != full {
			s.opts.Logger.Info("disk has room again: the state is writable", "state", s.dir, "freeBytes", u.AvailBytes)
		}
	}
	if s.full.Load() {
		return fmt.Errorf("%w: the disk of %s has less than %s free; changes are refused until there is room", ErrDiskFull, s.dir, bytesText(s.opts.MinFreeBytes))
	}
	return s.opts.bg.err(s.dir)
}

// roomMargin is the least free space above MinFreeBytes at which a full
// disk has room again.
const roomMargin = 8 << 20

// bytesText is n in MiB, or in bytes below one.
func bytesText(n uint64) string {
	if n < 1<<20 {
		return strconv.FormatUint(n, 10) + " bytes"
	}
	return strconv.FormatUint(n>>20, 10) + " MiB"
}

// Ready reports why writes are refused (Writable), or that the store is
// closed, or nil: what the coordinator's /readyz asks.
func (s *Store) Ready(context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("pebblestore: the store is closed")
	}
	return s.Writable()
}

var _ service.Readier = (*Store)(nil)

// Close waits for the writes under way (a synced one until it is durable),
// writes the pending changes (synced), closes the database and releases
// the directory. Writes after it are refused.
func (s *Store) Close() error {
	s.use.Lock()
	defer s.use.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("pebblestore: the store is closed already")
	}
	s.closed = true
	var err error
	if db := s.db.Load(); db != nil {
		err = errors.Join(s.closeWrites(db), db.Close())
	}
	return errors.Join(err, s.lock.Close())
}

func (o *Options) defaults() {
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = 64 << 20
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 100 * time.Millisecond
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.warned == nil {
		o.warned = &sync.Map{}
	}
	if o.bg == nil {
		o.bg = &background{log: o.Logger, now: time.Now, sleep: time.Sleep}
	}
}

// pebble fills in the options every open shares.
func (o *Options) pebble(p *pebble.Options) *pebble.Options {
	p.FS, p.Logger = prefilledFS{o.FS}, pebbleLogger{l: o.Logger, fs: o.FS, warned: o.warned}
	p.EventListener = &pebble.EventListener{
		// The read that found it fails too; Pebble's default stops the process.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			o.Logger.Error("pebble found damaged data: "+restoreHint, "file", info.Path, "err", firstLine(info.Details))
		},
	}
	o.bg.listen(p.EventListener)
	return p
}

// walFill is how much of each new write-ahead log is written with zeros
// first: more than Pebble preallocates for a log of its default 4 MiB
// memtable.
const walFill = 5 << 20

// prefilledFS writes zeros over the first walFill bytes of each new
// write-ahead log Pebble creates (once, synced), so appending to it does not
// change the file's size and each fdatasync has no metadata to write. Pebble
// reuses old logs once it has some (overwriting them the same way); this
// covers the first ones after each start, where a log that grows measured
// about 1.6x the server CPU per synced grant on this machine's ext4. Pebble
// reads the zeros after the last record as the end of the log.
type prefilledFS struct{ vfs.FS }

func (fs prefilledFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < walFill && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros, off)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// pebbleLogger passes Pebble's errors on and drops its information lines,
// but for a log replay that stopped before the end of what was written
// (replayStopped). Pebble calls Fatalf when it cannot go on, a failed write
// of its log included, and goes on as if nothing happened if Fatalf
// returns: it stops the process, so nothing that is not durable is ever
// answered.
type pebbleLogger struct {
	l      *slog.Logger
	fs     vfs.FS
	warned *sync.Map // the replays warned about, by file and offset
}

func (p pebbleLogger) Infof(format string, args ...any) {
	if strings.Contains(format, "stopped reading at offset") && len(args) >= 3 {
		if off, ok := args[2].(wal.Offset); ok {
			p.replayStopped(off)
		}
	}
}

// replayStopped warns, once per file and offset, when Pebble's replay of a
// log stopped before the end of what was written to it: a chunk of this
// log lies at or after the offset where it stopped (a damaged or cut
// record), or the log is shorter than every log is written (prefilledFS):
// it was cut. What follows that point is lost.
func (p pebbleLogger) replayStopped(off wal.Offset) {
	if p.fs == nil || p.warned == nil || off.PhysicalFile == "" {
		return
	}
	why := replayCut(p.fs, off.PhysicalFile, off.Physical)
	if why == "" {
		return
	}
	if _, dup := p.warned.LoadOrStore(off.PhysicalFile+"@"+strconv.FormatInt(off.Physical, 10), true); dup {
		return
	}
	p.l.Warn("the state's log was read only up to a damaged or cut record: what was written after it is lost "+
		"(a crash in the middle of a write, or a damaged disk). Grants written after it may be forgotten; "+
		"no fence is issued again (the fence mark is kept in a table)",
		"file", off.PhysicalFile, "offset", off.Physical, "found", why)
}

// replayCut says why the log at path holds more than was replayed from it
// up to offset off, or "" if nothing says so.
func replayCut(fs vfs.FS, path string, off int64) string {
	num, err := strconv.ParseUint(strings.TrimSuffix(fs.PathBase(path), ".log"), 10, 32)
	if err != nil {
		return ""
	}
	f, err := fs.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	buf := make([]byte, min(st.Size()-off, 1<<20))
	if len(buf) > 0 {
		if n, _ := f.ReadAt(buf, off); n < len(buf) {
			buf = buf[:n]
		}
	}
	// A chunk header of Pebble's recyclable or walSync formats: checksum
	// (4), length (2), encoding (5-12), log number (4).
	for i := 0; i+11 <= len(buf); i++ {
		if e := buf[i+6]; e >= 5 && e <= 12 && binary.LittleEndian.Uint32(buf[i+7:i+11]) == uint32(num) {
			return "a record of this log at offset " + strconv.FormatInt(off+int64(i), 10) + " could not be read"
		}
	}
	if st.Size() < walFill {
		return "the log has " + strconv.FormatInt(st.Size(), 10) + " bytes, fewer than the " + strconv.Itoa(walFill) + " every log is written with: it was cut"
	}
	return ""
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "the state cannot be written, so the coordinator stops (the call being written is not answered; restart it): " +
		fmt.Sprintf(format, args...)
	p.l.Error(msg)
	fmt.Fprintln(os.Stderr, "pebblestore: "+msg)
	os.Exit(1)
}
