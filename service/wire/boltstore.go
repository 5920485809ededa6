//go:build !js && !wasip1

package wire

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The layout of a state database: a "meta" bucket with the format, the
// fence high-water mark, the id of its log and the checkpoint (the
// sequence number and log position of the last log frame it holds), a
// "leases" bucket with one record per resource that has a lease, keyed by
// the resource name, and a "released" bucket with the releases of the last
// TTL, keyed by request id.
var (
	bucketMeta     = []byte("meta")
	bucketLeases   = []byte("leases")
	bucketReleased = []byte("released")
	keyFormat      = []byte("format")
	keyIssued      = []byte("issuedFence")
	keyLogID       = []byte("logId")
	keyLogSeq      = []byte("logSeq")
	keyLogPos      = []byte("logPos")
	formatValue    = []byte("lease-fence state v2")
	formatV1       = []byte("lease-fence state v1")
)

// recordVersion is the first byte of every encoded record.
const recordVersion = 1

// BoltStore is a Store in a bbolt database (go.etcd.io/bbolt, etcd's own
// store) with a write-ahead log in front of it (docs/service.md, Durable
// state): one record per resource in the database; every group of
// concurrent changes is appended to the log as one frame and made durable
// by one fdatasync, then answered; a checkpoint writes the frames into the
// database in one bbolt transaction every checkpointEvery (or sooner when
// the log fills), and the frames it has not taken yet are replayed into it
// at open. Changes that arrive while a frame is being written are written
// together by the next one (group commit). Reads see every change: the
// store keeps the changes not yet in the database in memory. The cost of a
// change does not depend on how many records exist.
type BoltStore struct {
	db   *bolt.DB
	path string
	log  *walFile

	mu      sync.Mutex
	queue   []*pendingApply
	waiting int           // changes in queue whose caller waits (Apply, not ApplyLater)
	want    int           // waiting changes at which the committer wants a kick
	closed  bool          // Close was called; the committer finishes the queue and stops
	kick    chan struct{} // wakes the committer
	stopped chan struct{} // closed when the committer has stopped
	failed  error         // the last write failed with this; cleared by a write that succeeds

	// The log, guarded by mu: the next frame's number and ring position,
	// the fence high-water mark of everything written, and the frames
	// written but not yet in the database (oldest first).
	nextSeq uint64
	head    int64
	hw      uint64
	pending []logFrame
	pendSz  int64
	ckGen   uint64     // checkpoints tried so far
	ckErr   error      // the last checkpoint failed with this
	ckDone  *sync.Cond // on mu: a checkpoint was tried

	ckMu      sync.Mutex    // one checkpoint at a time
	ckKick    chan struct{} // asks the checkpointer for a checkpoint now
	ckStop    chan struct{} // stops the checkpointer
	ckStopped chan struct{}

	// The changes not yet in the database, by key, for reads: guarded by
	// ovMu, held for reading across a read of the database too, so that
	// a checkpoint's pruning is never seen half done.
	ovMu     sync.RWMutex
	ovLeases map[string]*ovLease
	ovRels   map[string]*ovRelease

	broken error // writing the log failed; owned by the committer

	// beforeWrite, if set (tests), is called by the committer before each
	// write to the log with the changes it is about to write; an error it
	// returns fails that write.
	beforeWrite func(batch []Change) error
}

// logFrame is a frame in the log that the database does not hold yet.
type logFrame struct {
	seq      uint64
	pos, end int64
	changes  []Change
}

// ovLease is the latest change to one resource's record not yet in the
// database: its record, or its deletion. seq is the frame that holds it,
// or pendingSeq while it is queued (an ApplyLater change); by is the
// queued change that made it.
type ovLease struct {
	rec Record
	del bool
	seq uint64
	by  *pendingApply
}

type ovRelease struct {
	rel Release
	del bool
	seq uint64
	by  *pendingApply
}

const pendingSeq = math.MaxUint64

// checkpointEvery is how often the frames in the log are written into the
// database; a checkpoint also starts when they take a quarter of the ring.
const checkpointEvery = time.Second

func newBoltStore(db *bolt.DB, path string, log *walFile, seq uint64, head int64, hw uint64) *BoltStore {
	b := &BoltStore{db: db, path: path, log: log, want: 1, kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		nextSeq: seq + 1, head: head, hw: hw,
		ckKick: make(chan struct{}, 1), ckStop: make(chan struct{}), ckStopped: make(chan struct{}),
		ovLeases: make(map[string]*ovLease), ovRels: make(map[string]*ovRelease)}
	b.ckDone = sync.NewCond(&b.mu)
	go b.commit()
	go b.checkpointer()
	return b
}

type pendingApply struct {
	c    Change
	done chan error // nil for an ApplyLater change: nobody waits
}

var (
	_ Store      = (*BoltStore)(nil)
	_ LaterStore = (*BoltStore)(nil)
)

// CreateBoltStore creates a new, empty state database at path (mode 0600)
// with a high-water mark of 0, and its log next to it (path + ".wal"). It
// refuses a path that already exists, or whose log exists, so an existing
// state is never started over by mistake.
func CreateBoltStore(path string) (*BoltStore, error) {
	if _, err := os.Lstat(walPath(path)); err == nil {
		return nil, errors.New("wire: " + walPath(path) + " already exists; refusing to create a new state over it")
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, errors.New("wire: " + path + " already exists; refusing to create a new state over it (start without -init to use it)")
		}
		return nil, errors.New("wire: creating " + path + ": " + err.Error())
	}
	f.Close()
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	log, err := createWAL(walPath(path), id)
	if err != nil {
		_ = os.Remove(path)
		return nil, errors.New("wire: creating " + walPath(path) + ": " + err.Error())
	}
	fail := func(err error) (*BoltStore, error) {
		log.close()
		_ = os.Remove(walPath(path))
		_ = os.Remove(path)
		return nil, errors.New("wire: creating " + path + ": " + err.Error())
	}
	db, err := bolt.Open(path, 0o600, boltOptions())
	if err != nil {
		return fail(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketLeases); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketReleased); err != nil {
			return err
		}
		for _, kv := range [][2][]byte{
			{keyFormat, formatValue}, {keyIssued, make([]byte, 8)}, {keyLogID, id[:]}, {keyLogSeq, make([]byte, 8)}, {keyLogPos, make([]byte, 8)},
		} {
			if err := meta.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return fail(err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		db.Close()
		return fail(err)
	}
	return newBoltStore(db, path, log, 0, 0, 0), nil
}

// syncDir makes the creation of files in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// OpenBoltStore opens the state database at path, which must exist (a
// missing file is an error, not a fresh start: a mistyped path must not
// reissue fences), and its log, which must exist too, and writes the
// frames of the log the database does not hold yet into it. A damaged
// log is refused (docs/service.md, Fail-closed start). The database's
// contents are checked by Load.
func OpenBoltStore(path string) (*BoltStore, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errors.New("wire: state database " + path + " does not exist; create it once with -init (starting empty would reissue fences)")
	}
	if err != nil {
		return nil, errors.New("wire: state database " + path + ": " + err.Error())
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("wire: state database " + path + " is not a regular file")
	}
	if err := checkBoltFile(path, fi.Size()); err != nil {
		return nil, errors.New("wire: state database " + path + " cannot be opened: " + err.Error())
	}
	db, err := openBolt(path)
	if err != nil {
		return nil, errors.New("wire: state database " + path + " cannot be opened: " + err.Error())
	}
	if err := checkBolt(db); err != nil {
		db.Close()
		return nil, errors.New("wire: state database " + path + " cannot be opened: " + err.Error())
	}
	log, seq, head, hw, err := replay(db, path)
	if err != nil {
		db.Close()
		return nil, errors.Join(errors.New("wire: state database "+path+" cannot be opened"), err)
	}
	return newBoltStore(db, path, log, seq, head, hw), nil
}

// logMeta reads the log id, the checkpoint and the high-water mark from
// the meta bucket.
func logMeta(tx *bolt.Tx) (id [16]byte, seq uint64, pos int64, hw uint64, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return id, 0, 0, 0, inconsistent("the meta bucket is missing (not a lease-fence state database?)")
	}
	if f := meta.Get(keyFormat); bytes.Equal(f, formatV1) {
		return id, 0, 0, 0, inconsistent("format " + quoteShort(string(f)) + " is from before the write-ahead log; this build cannot use it")
	} else if !bytes.Equal(f, formatValue) {
		return id, 0, 0, 0, inconsistent("unknown format " + quoteShort(string(f)))
	}
	v := meta.Get(keyLogID)
	if len(v) != 16 {
		return id, 0, 0, 0, inconsistent("the log id is missing or not 16 bytes")
	}
	copy(id[:], v)
	s, p := meta.Get(keyLogSeq), meta.Get(keyLogPos)
	if len(s) != 8 || len(p) != 8 {
		return id, 0, 0, 0, inconsistent("the log checkpoint is missing or not 8 bytes")
	}
	if h := meta.Get(keyIssued); len(h) == 8 {
		hw = binary.BigEndian.Uint64(h)
	}
	return id, binary.BigEndian.Uint64(s), int64(binary.BigEndian.Uint64(p)), hw, nil
}

// replay opens the log of the database at path and writes the frames the
// database does not hold yet into it, in one transaction. It returns the
// log, the last frame's number, the ring position after it and the
// high-water mark.
func replay(db *bolt.DB, path string) (*walFile, uint64, int64, uint64, error) {
	var id [16]byte
	var seq, hw uint64
	var pos int64
	err := db.View(func(tx *bolt.Tx) (err error) {
		id, seq, pos, hw, err = logMeta(tx)
		return err
	})
	if err != nil {
		return nil, 0, 0, 0, err
	}
	log, err := openWAL(walPath(path), id)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	frames, err := log.recover(seq, pos)
	if err != nil {
		log.close()
		return nil, 0, 0, 0, err
	}
	if len(frames) == 0 {
		return log, seq, pos, hw, nil
	}
	var cs []Change
	for _, fr := range frames {
		c, err := decodeChanges(fr.payload)
		if err != nil {
			log.close()
			return nil, 0, 0, 0, errors.Join(errors.New("wire: log frame "+strconv.FormatUint(fr.seq, 10)), err)
		}
		cs = append(cs, c...)
	}
	last := frames[len(frames)-1]
	err = db.Update(func(tx *bolt.Tx) error {
		return checkpointTx(tx, [][]Change{cs}, last.seq, last.end)
	})
	if err == nil {
		err = db.View(func(tx *bolt.Tx) error {
			hw = binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyIssued))
			return nil
		})
	}
	if err != nil {
		log.close()
		return nil, 0, 0, 0, errors.Join(errors.New("wire: replaying the log"), err)
	}
	return log, last.seq, last.end, hw, nil
}

// checkpointTx writes groups of changes, in order, into the database in tx
// and records that the log is written into it up to frame seq, ending at pos.
func checkpointTx(tx *bolt.Tx, groups [][]Change, seq uint64, pos int64) error {
	w := newChangeWriter(tx)
	for _, cs := range groups {
		for _, c := range cs {
			if err := w.apply(c); err != nil {
				return err
			}
		}
	}
	if err := w.done(); err != nil {
		return err
	}
	return putCheckpoint(tx, seq, pos)
}

func putCheckpoint(tx *bolt.Tx, seq uint64, pos int64) error {
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(keyLogSeq, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		return err
	}
	return meta.Put(keyLogPos, binary.BigEndian.AppendUint64(nil, uint64(pos)))
}

// openBolt opens path, turning a panic of bbolt over a damaged file into an
// error.
func openBolt(path string) (db *bolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("damaged database (%v)", p)
		}
	}()
	return bolt.Open(path, 0o600, boltOptions())
}

// check runs bbolt's own consistency check over every page.
func checkBolt(db *bolt.DB) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("damaged database (%v)", p)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() { // drained to the end: the checker runs until it is
			if first == nil {
				first = fmt.Errorf("damaged database: %w", err)
			}
		}
		return first
	})
}

// checkBoltFile reads the two meta pages of a bbolt file the way bbolt does
// (magic, version, FNV-64a checksum; the valid one with the higher
// transaction id wins) and refuses a file shorter than the pages that meta
// page says exist. bbolt maps the file into memory and would otherwise die
// of SIGBUS reading past the end of a truncated file, which no recover
// catches. The layout is bbolt's (little-endian, as on every platform it
// is used on here): a 16-byte page header, then magic, version, page size,
// flags (4 bytes each), root page, root sequence, freelist page, page count,
// transaction id and checksum (8 bytes each).
func checkBoltFile(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type meta struct{ pageSize, root, freelist, pgid, txid uint64 }
	read := func(off int64) (meta, bool) {
		var buf [16 + 64]byte
		if n, _ := f.ReadAt(buf[:], off); n != len(buf) {
			return meta{}, false
		}
		m := buf[16:]
		le := binary.LittleEndian
		if le.Uint32(m[0:]) != 0xED0CDAED || le.Uint32(m[4:]) != 2 {
			return meta{}, false
		}
		h := fnv.New64a()
		h.Write(m[:56])
		if h.Sum64() != le.Uint64(m[56:]) {
			return meta{}, false
		}
		return meta{uint64(le.Uint32(m[8:])), le.Uint64(m[16:]), le.Uint64(m[32:]), le.Uint64(m[40:]), le.Uint64(m[48:])}, true
	}
	m0, ok0 := read(0)
	var m1 meta
	var ok1 bool
	for _, ps := range []int64{int64(m0.pageSize), int64(os.Getpagesize()), 4096, 16384, 65536} {
		if ps >= 512 {
			if m1, ok1 = read(ps); ok1 {
				break
			}
		}
	}
	best, ok := m0, ok0
	if ok1 && (!ok0 || m1.txid > m0.txid) {
		best, ok = m1, true
	}
	if !ok {
		return errors.New("not a bbolt database (no valid meta page)")
	}
	if best.pageSize < 512 || best.pgid < 2 || best.root >= best.pgid || (best.freelist >= best.pgid && best.freelist != math.MaxUint64) {
		return errors.New("damaged database (the meta page is inconsistent)")
	}
	if need := best.pgid * best.pageSize; uint64(size) < need {
		return fmt.Errorf("truncated database (%d bytes; its meta page says %d)", size, need)
	}
	return nil
}

func boltOptions() *bolt.Options {
	return &bolt.Options{
		// Another process holding the file is an error, not a wait.
		Timeout:      time.Second,
		FreelistType: bolt.FreelistMapType,
		// The free page list is not written by every commit (fewer
		// bytes to fsync per transaction); bbolt rebuilds it by a scan
		// at open, as etcd configures it.
		NoFreelistSync: true,
	}
}

// Path returns the database's path.
func (b *BoltStore) Path() string { return b.path }

// Close writes the changes already queued, stops the committer, writes
// the log into the database and closes both. Apply fails after Close.
func (b *BoltStore) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.wake()
	b.mu.Unlock()
	<-b.stopped
	close(b.ckStop)
	<-b.ckStopped
	// What the checkpoint cannot write stays in the log, replayed at open.
	_ = b.checkpoint()
	return errors.Join(b.log.close(), b.db.Close())
}

// Load reads and checks everything: the format, the high-water mark, every
// record (its encoding, and that its fence is not above the mark).
func (b *BoltStore) Load(context.Context) (Stored, error) {
	if err := b.checkpoint(); err != nil {
		return Stored{}, errors.New("wire: state database " + b.path + ": writing the log into it: " + err.Error())
	}
	var st Stored
	err := b.db.View(func(tx *bolt.Tx) error {
		var extra []string
		_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if !bytes.Equal(name, bucketMeta) && !bytes.Equal(name, bucketLeases) && !bytes.Equal(name, bucketReleased) {
				extra = append(extra, quoteShort(string(name)))
			}
			return nil
		})
		if len(extra) > 0 {
			return inconsistent("unexpected buckets " + strings.Join(extra, ", "))
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return inconsistent("the meta bucket is missing (not a lease-fence state database?)")
		}
		if _, _, _, _, err := logMeta(tx); err != nil {
			return err
		}
		v := meta.Get(keyIssued)
		if v == nil {
			return inconsistent("the fence high-water mark is missing")
		}
		if len(v) != 8 {
			return inconsistent("the fence high-water mark has " + strconv.Itoa(len(v)) + " bytes, not 8")
		}
		st.IssuedFence = binary.BigEndian.Uint64(v)
		var bad error
		_ = meta.ForEach(func(k, _ []byte) error {
			if !bytes.Equal(k, keyFormat) && !bytes.Equal(k, keyIssued) && !bytes.Equal(k, keyLogID) &&
				!bytes.Equal(k, keyLogSeq) && !bytes.Equal(k, keyLogPos) {
				bad = inconsistent("unexpected meta key " + quoteShort(string(k)))
			}
			return nil
		})
		if bad != nil {
			return bad
		}
		leases := tx.Bucket(bucketLeases)
		if leases == nil {
			return inconsistent("the leases bucket is missing")
		}
		err := leases.ForEach(func(k, v []byte) error {
			if v == nil {
				return inconsistent("the leases bucket holds a nested bucket " + quoteShort(string(k)))
			}
			r, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			st.Records = append(st.Records, r)
			return nil
		})
		if err != nil {
			return err
		}
		released := tx.Bucket(bucketReleased)
		if released == nil {
			return inconsistent("the released bucket is missing")
		}
		return released.ForEach(func(k, v []byte) error {
			if v == nil {
				return inconsistent("the released bucket holds a nested bucket " + quoteShort(string(k)))
			}
			r, err := decodeRelease(k, v)
			if err != nil {
				return err
			}
			st.Released = append(st.Released, r)
			return nil
		})
	})
	if err != nil {
		return Stored{}, errors.Join(errors.New("wire: state database "+b.path+" refused"), err)
	}
	if err := CheckStored(st); err != nil {
		return Stored{}, errors.Join(errors.New("wire: state database "+b.path+" refused"), err)
	}
	return st, nil
}

// Get returns the record of resource.
func (b *BoltStore) Get(_ context.Context, resource string) (rec Record, ok bool, err error) {
	b.ovMu.RLock()
	defer b.ovMu.RUnlock()
	if e := b.ovLeases[resource]; e != nil {
		return e.rec, !e.del, nil
	}
	err = b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLeases).Get([]byte(resource))
		if v == nil {
			return nil
		}
		rec, err = decodeRecord([]byte(resource), v)
		ok = err == nil
		return err
	})
	return rec, ok, err
}

// Apply writes c durably, together with the changes of concurrent callers
// (and every ApplyLater change queued before it).
func (b *BoltStore) Apply(_ context.Context, c Change) error {
	if err := checkChange(c); err != nil {
		return err
	}
	p := &pendingApply{c: c, done: make(chan error, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("wire: the state database is closed")
	}
	b.queue = append(b.queue, p)
	b.waiting++
	if b.waiting >= b.want {
		b.wake()
	}
	b.mu.Unlock()
	return <-p.done
}

// ApplyLater queues c, which may only delete records and add or forget
// releases (no Put), and returns without waiting for it to be written:
// from its return Get no longer finds the deleted records, and c is
// written in the next log frame, before the changes of every Apply and
// ApplyLater that comes after it. If that write fails, c stays at the
// head of the queue and is written again with the next one, so no later
// change is ever made durable without it (a later Apply fails as long as c
// cannot be written). A crash, or Close over a failing disk, before c is
// written loses c: the store holds what it held before c.
func (b *BoltStore) ApplyLater(c Change) error {
	if len(c.Put) > 0 {
		return errors.New("wire: ApplyLater cannot store records (Put); use Apply")
	}
	if err := checkChange(c); err != nil {
		return err
	}
	p := &pendingApply{c: c}
	// Seen by reads before the committer can write it.
	b.ovMu.Lock()
	b.overlayLocked(p, pendingSeq)
	b.ovMu.Unlock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.unoverlay([]*pendingApply{p})
		return errors.New("wire: the state database is closed")
	}
	b.queue = append(b.queue, p)
	// The first queued change wakes the committer so that it starts
	// waiting laterWait for company; laterMax of them start a write.
	if len(b.queue) == 1 || len(b.queue)-b.waiting >= laterMax {
		b.wake()
	}
	b.mu.Unlock()
	return nil
}

func checkChange(c Change) error {
	for _, r := range c.Put {
		if err := checkRecord(r, max(c.IssuedFence, r.Fence)); err != nil {
			return err
		}
	}
	for _, r := range c.Released {
		if err := checkRelease(r, max(c.IssuedFence, r.Fence)); err != nil {
			return err
		}
	}
	return nil
}

// wake kicks the committer; b.mu is held.
func (b *BoltStore) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// laterWait bounds how long an ApplyLater change waits for an Apply to
// share its write with; laterMax is how many ApplyLater changes are
// written at once without waiting.
const (
	laterWait = 2 * time.Millisecond
	laterMax  = 64
)

// gatherMin and gatherMax bound how long the committer waits for more
// changes before a write, when the last writes showed concurrent callers.
const (
	gatherMin = 250 * time.Microsecond
	gatherMax = 2 * time.Millisecond
)

// commit is the committer: it writes every queued change in one log write
// and one fdatasync, over and over. Callers whose changes arrive while a
// write is under way wait for the next one. The callers a write answers
// usually come back with their next change soon (a round trip later);
// without waiting for them, several callers split into groups that
// alternate, each paying its own fdatasync (and, on busy cores, the
// wake-ups around it). So before writing, the committer waits until the
// queue holds as many waiting changes as the last write answered plus
// those that arrived while it was being written, up to a bound that
// follows how long callers take to come back: 1.5 times the running
// average of the waits that were met, doubled after a wait that was not,
// from gatherMin to gatherMax. A lone caller never waits: it is the only
// one expected. ApplyLater changes have nobody waiting: a queue of only
// those waits up to laterWait for an Apply to come and share the write (a
// release is usually followed by an acquisition), unless laterMax of them
// are queued or the store is closing. After a failed write the ApplyLater
// changes of it go back to the head of the queue, and the committer waits
// laterWait (doubling, up to a second, while writes keep failing) before
// trying again.
func (b *BoltStore) commit() {
	defer close(b.stopped)
	expect := 1
	backoff := laterWait
	var answeredAt time.Time   // when the last write's callers were answered
	var comeback time.Duration // running average of the met waits, from answeredAt
	bound := gatherMin
	for {
		b.mu.Lock()
		b.want = 1
		if b.waiting == 0 && !b.closed && len(b.queue) < laterMax {
			wait := laterWait
			if b.failed != nil {
				wait = backoff
			}
			var t *time.Timer
			var tc <-chan time.Time
		idle:
			for b.waiting == 0 && !b.closed && len(b.queue) < laterMax {
				if len(b.queue) > 0 && tc == nil {
					t = time.NewTimer(wait)
					tc = t.C
				}
				b.mu.Unlock()
				select {
				case <-b.kick:
					b.mu.Lock()
				case <-tc:
					b.mu.Lock()
					break idle
				}
			}
			if t != nil {
				t.Stop()
			}
		}
		if len(b.queue) == 0 {
			b.mu.Unlock()
			return // closed
		}
		if b.waiting > 0 && b.waiting < expect && !b.closed {
			b.want = expect
			t := time.NewTimer(bound)
			met := true
		gather:
			for b.waiting < expect && !b.closed {
				b.mu.Unlock()
				select {
				case <-b.kick:
					b.mu.Lock()
				case <-t.C:
					b.mu.Lock()
					met = false
					break gather
				}
			}
			t.Stop()
			if met {
				comeback += (time.Since(answeredAt) - comeback) / 8
				bound = min(max(comeback*3/2, gatherMin), gatherMax)
			} else {
				bound = min(2*bound, gatherMax)
			}
		}
		batch := b.queue
		b.queue = nil
		answered := b.waiting
		b.waiting = 0
		b.want = 1
		closed := b.closed
		b.mu.Unlock()
		refused, err := b.write(batch)
		b.mu.Lock()
		var retry, dropped []*pendingApply
		for i, p := range batch {
			if p.done != nil {
				continue
			}
			switch {
			case err != nil && !closed:
				retry = append(retry, p)
			case err != nil || refused[i] != nil:
				// Dropped by a Close over a failing disk (as a crash
				// would): reads see the database again.
				dropped = append(dropped, p)
			}
		}
		if len(retry) > 0 {
			b.queue = append(retry, b.queue...)
		}
		if err != nil {
			b.failed = err
			backoff = min(2*backoff, time.Second)
		} else {
			b.failed = nil
			backoff = laterWait
		}
		expect = max(1, answered+b.waiting)
		b.mu.Unlock()
		b.unoverlay(dropped)
		answeredAt = time.Now()
		for i, p := range batch {
			if p.done != nil {
				if err != nil {
					p.done <- err
				} else {
					p.done <- refused[i]
				}
			}
		}
	}
}

// write appends the changes of batch to the log in one write and makes
// them durable with one fdatasync. A change whose record or release has a
// fence above the high-water mark (its own and that of everything written
// before) is refused (refused[i]) and not written; err is set if the write
// failed, and then nothing of batch counts as written.
func (b *BoltStore) write(batch []*pendingApply) (refused []error, err error) {
	refused = make([]error, len(batch))
	hw := b.hw
	cs := make([]Change, 0, len(batch))
	for i, p := range batch {
		m := max(hw, p.c.IssuedFence)
		if err := admit(p.c, m); err != nil {
			refused[i] = err
			continue
		}
		hw = m
		cs = append(cs, p.c)
	}
	if b.beforeWrite != nil {
		if err := b.beforeWrite(cs); err != nil {
			return refused, err
		}
	}
	if len(cs) == 0 {
		return refused, nil
	}
	if b.broken != nil {
		return refused, b.broken
	}
	groups, payloads, err := splitFrames(cs)
	if err != nil {
		return refused, err
	}
	sizes := make([]int64, len(groups))
	for i, pl := range payloads {
		sizes[i] = frameSize(len(pl))
	}
	pos, err := b.place(sizes)
	if err != nil {
		return refused, err
	}
	// One write per run of adjacent frames (two if the ring wraps), then
	// one fdatasync.
	var buf []byte
	start := pos[0]
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := b.log.f.WriteAt(buf, walHeaderSize+start)
		buf = buf[:0]
		return err
	}
	for i, pl := range payloads {
		if pos[i] != start+int64(len(buf)) {
			if err := flush(); err != nil {
				return refused, b.breakLog(err)
			}
			start = pos[i]
		}
		buf = appendFrame(buf, b.nextSeq+uint64(i), pl)
	}
	if err := flush(); err != nil {
		return refused, b.breakLog(err)
	}
	if err := fdatasync(b.log.f); err != nil {
		return refused, b.breakLog(err)
	}
	last := b.nextSeq + uint64(len(groups)) - 1
	b.mu.Lock()
	for i, g := range groups {
		b.pending = append(b.pending, logFrame{seq: b.nextSeq + uint64(i), pos: pos[i], end: pos[i] + sizes[i], changes: g})
		b.pendSz += sizes[i]
	}
	b.nextSeq = last + 1
	b.head = pos[len(pos)-1] + sizes[len(sizes)-1]
	b.hw = hw
	full := b.pendSz > b.log.size/4
	b.mu.Unlock()
	if full {
		select {
		case b.ckKick <- struct{}{}:
		default:
		}
	}
	b.ovMu.Lock()
	for i, p := range batch {
		if refused[i] == nil {
			b.overlayLocked(p, last)
		}
	}
	b.ovMu.Unlock()
	return refused, nil
}

// breakLog records that writing the log failed: what is on disk at the
// write position is unknown, so nothing more is written to it until the
// store is opened again (which reads what the log holds).
func (b *BoltStore) breakLog(err error) error {
	b.broken = errors.New("writing the log " + b.log.path + " failed (" + err.Error() + "); restart the coordinator")
	return b.broken
}

// admit checks that c's records and releases have fences up to hw.
func admit(c Change, hw uint64) error {
	for _, r := range c.Put {
		if r.Fence > hw {
			return inconsistent("a record's fence is above the high-water mark")
		}
	}
	for _, r := range c.Released {
		if r.Fence > hw {
			return inconsistent("a release's fence is above the high-water mark")
		}
	}
	return nil
}

// splitFrames groups cs into frames of at most maxFrame bytes, and returns
// each frame's payload (encodeChanges of its group). A change that alone is
// larger is split, if it only deletes records or forgets releases (a
// sweep's); such a change is still made durable in full before Apply
// returns, and its parts are independent.
func splitFrames(cs []Change) (groups [][]Change, payloads [][]byte, err error) {
	var cur []Change
	var curEnc, enc []byte // the encodings of cur's changes; of one change
	curSize := 0
	done := func() {
		groups = append(groups, cur)
		payloads = append(payloads, append(binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(curEnc)), uint64(len(cur))), curEnc...))
		cur, curEnc, curSize = nil, nil, 0
	}
	for _, c := range cs {
		for _, part := range splitChange(c) {
			enc = appendChange(enc[:0], part)
			n := 1 + len(enc) // len(encodeChanges(nil, []Change{part}))
			if n > maxFrame-frameHeader {
				return nil, nil, errors.New("wire: a change of " + strconv.Itoa(n) + " bytes is larger than a log frame")
			}
			if curSize+n > maxFrame-frameHeader && len(cur) > 0 {
				done()
			}
			cur = append(cur, part)
			curEnc = append(curEnc, enc...)
			curSize += n
		}
	}
	if len(cur) > 0 {
		done()
	}
	return groups, payloads, nil
}

// splitChange splits a change that only deletes and forgets into parts of
// at most 512 names each.
func splitChange(c Change) []Change {
	const most = 512
	if len(c.Put) > 0 || len(c.Released) > 0 || len(c.Delete)+len(c.Forget) <= most {
		return []Change{c}
	}
	var out []Change
	for i := 0; i < len(c.Delete); i += most {
		out = append(out, Change{IssuedFence: c.IssuedFence, Delete: c.Delete[i:min(i+most, len(c.Delete))]})
	}
	for i := 0; i < len(c.Forget); i += most {
		out = append(out, Change{IssuedFence: c.IssuedFence, Forget: c.Forget[i:min(i+most, len(c.Forget))], ForgetBefore: c.ForgetBefore})
	}
	return out
}

// place returns the ring positions of frames of sizes, written after the
// last one: each right after the previous, or at the ring's start when it
// does not fit before the end, never over a frame the database does not
// hold yet. If they do not fit, it has a checkpoint taken and waits for it.
func (b *BoltStore) place(sizes []int64) ([]int64, error) {
	var total int64
	for _, n := range sizes {
		total += n
	}
	if total > b.log.size/2 {
		return nil, errors.New("wire: a group of " + strconv.FormatInt(total, 10) + " bytes is too large for the log")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for tries := 0; ; tries++ {
		if pos, ok := b.fit(sizes); ok {
			return pos, nil
		}
		if tries > 0 && b.ckErr != nil {
			return nil, errors.New("wire: the log is full and writing it into the database failed: " + b.ckErr.Error())
		}
		g := b.ckGen
		select {
		case b.ckKick <- struct{}{}:
		default:
		}
		for b.ckGen == g {
			b.ckDone.Wait()
		}
	}
}

// fit is place without waiting; b.mu is held.
func (b *BoltStore) fit(sizes []int64) ([]int64, bool) {
	size := b.log.size
	head := b.head
	tail := int64(-1) // position of the oldest frame the database does not hold
	if len(b.pending) > 0 {
		tail = b.pending[0].pos
	}
	wrapped := tail >= 0 && head <= tail
	out := make([]int64, len(sizes))
	for i, n := range sizes {
		switch {
		case tail < 0:
			if head+n > size {
				head = 0
			}
			tail = head
		case !wrapped:
			if head+n > size {
				if n > tail {
					return nil, false
				}
				head, wrapped = 0, true
			}
		default:
			if head+n > tail {
				return nil, false
			}
		}
		out[i] = head
		head += n
	}
	return out, true
}

// checkpointer writes the log into the database every checkpointEvery,
// and when asked.
func (b *BoltStore) checkpointer() {
	defer close(b.ckStopped)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-b.ckStop:
			return
		case <-b.ckKick:
		case <-t.C:
		}
		_ = b.checkpoint()
	}
}

// checkpoint writes the frames written so far into the database in one
// transaction, with the number and end of the last one. From then on their
// ring space may be written over, and reads find their changes in the
// database.
func (b *BoltStore) checkpoint() error {
	b.ckMu.Lock()
	defer b.ckMu.Unlock()
	b.mu.Lock()
	frames := b.pending[:len(b.pending):len(b.pending)]
	b.mu.Unlock()
	var err error
	if len(frames) > 0 {
		last := frames[len(frames)-1]
		groups := make([][]Change, len(frames))
		for i, fr := range frames {
			groups[i] = fr.changes
		}
		err = b.db.Update(func(tx *bolt.Tx) error {
			return checkpointTx(tx, groups, last.seq, last.end)
		})
		if err == nil {
			b.ovMu.Lock()
			for k, e := range b.ovLeases {
				if e.seq <= last.seq {
					delete(b.ovLeases, k)
				}
			}
			for k, e := range b.ovRels {
				if e.seq <= last.seq {
					delete(b.ovRels, k)
				}
			}
			if len(b.ovLeases) == 0 {
				b.ovLeases = make(map[string]*ovLease) // a Go map never shrinks
			}
			if len(b.ovRels) == 0 {
				b.ovRels = make(map[string]*ovRelease)
			}
			b.ovMu.Unlock()
		}
	}
	b.mu.Lock()
	if err == nil && len(frames) > 0 {
		b.pending = append([]logFrame(nil), b.pending[len(frames):]...)
		b.pendSz = 0
		for _, fr := range b.pending {
			b.pendSz += fr.end - fr.pos
		}
	}
	b.ckErr = err
	b.ckGen++
	b.ckDone.Broadcast()
	b.mu.Unlock()
	return err
}

// overlayLocked records p's changes for reads, as held by frame seq (or
// pendingSeq: queued); b.ovMu is held for writing. An entry made by a
// change queued later is kept.
func (b *BoltStore) overlayLocked(p *pendingApply, seq uint64) {
	c := p.c
	setLease := func(name string, e ovLease) {
		if old := b.ovLeases[name]; old != nil && old.seq == pendingSeq && old.by != p {
			return
		}
		e.seq, e.by = seq, p
		b.ovLeases[name] = &e
	}
	setRel := func(id string, e ovRelease) {
		if old := b.ovRels[id]; old != nil && old.seq == pendingSeq && old.by != p {
			return
		}
		e.seq, e.by = seq, p
		b.ovRels[id] = &e
	}
	for _, r := range c.Put {
		setLease(r.Resource, ovLease{rec: r})
	}
	for _, name := range c.Delete {
		setLease(name, ovLease{del: true})
	}
	for _, r := range c.Released {
		setRel(r.RequestID, ovRelease{rel: r})
	}
	for _, id := range c.Forget {
		if r, ok := b.releaseLocked(id); ok && r.At <= c.ForgetBefore {
			setRel(id, ovRelease{del: true})
		}
	}
}

// unoverlay forgets the entries of queued changes that were dropped.
func (b *BoltStore) unoverlay(ps []*pendingApply) {
	if len(ps) == 0 {
		return
	}
	b.ovMu.Lock()
	defer b.ovMu.Unlock()
	for _, p := range ps {
		for k, e := range b.ovLeases {
			if e.by == p && e.seq == pendingSeq {
				delete(b.ovLeases, k)
			}
		}
		for k, e := range b.ovRels {
			if e.by == p && e.seq == pendingSeq {
				delete(b.ovRels, k)
			}
		}
	}
}

// releaseLocked returns the release of request id as reads see it; b.ovMu
// is held.
func (b *BoltStore) releaseLocked(id string) (Release, bool) {
	if e := b.ovRels[id]; e != nil {
		return e.rel, !e.del
	}
	var r Release
	var ok bool
	_ = b.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketReleased).Get([]byte(id)); v != nil {
			var err error
			r, err = decodeRelease([]byte(id), v)
			ok = err == nil
		}
		return nil
	})
	return r, ok
}

// changeWriter applies changes to the database in one transaction: the
// fence high-water mark is read at the first change and written once, by
// done, with the highest IssuedFence applied.
type changeWriter struct {
	tx                     *bolt.Tx
	meta, leases, released *bolt.Bucket
	hw                     uint64
	read                   bool
}

func newChangeWriter(tx *bolt.Tx) *changeWriter {
	return &changeWriter{tx: tx, meta: tx.Bucket(bucketMeta), leases: tx.Bucket(bucketLeases), released: tx.Bucket(bucketReleased)}
}

func (w *changeWriter) apply(c Change) error {
	if !w.read {
		cur := w.meta.Get(keyIssued)
		if len(cur) != 8 {
			return inconsistent("the fence high-water mark is missing")
		}
		w.hw, w.read = binary.BigEndian.Uint64(cur), true
	}
	hw := max(w.hw, c.IssuedFence)
	for _, r := range c.Put {
		if r.Fence > hw {
			return inconsistent("a record's fence is above the high-water mark")
		}
	}
	w.hw = hw
	for _, r := range c.Put {
		if err := w.leases.Put([]byte(r.Resource), encodeRecord(r)); err != nil {
			return err
		}
	}
	for _, name := range c.Delete {
		if err := w.leases.Delete([]byte(name)); err != nil {
			return err
		}
	}
	for _, r := range c.Released {
		if r.Fence > hw {
			return inconsistent("a release's fence is above the high-water mark")
		}
		if err := w.released.Put([]byte(r.RequestID), encodeRelease(r)); err != nil {
			return err
		}
	}
	for _, id := range c.Forget {
		v := w.released.Get([]byte(id))
		if len(v) >= 17 && math.Float64frombits(binary.BigEndian.Uint64(v[9:17])) <= c.ForgetBefore {
			if err := w.released.Delete([]byte(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// done writes the high-water mark, if any change was applied.
func (w *changeWriter) done() error {
	if !w.read {
		return nil
	}
	return w.meta.Put(keyIssued, binary.BigEndian.AppendUint64(nil, w.hw))
}

// encodeRelease lays a release out like a record: version, fence, time of
// the release, secret hash, then the holder id and the resource. The
// request id is the key.
func encodeRelease(r Release) []byte {
	return encodeRecord(Record{HolderID: r.HolderID, RequestID: r.Resource, Fence: r.Fence, ExpiresAt: r.At, SecretHash: r.SecretHash})
}

func decodeRelease(key, v []byte) (Release, error) {
	r, err := decodeRecord(key, v)
	if err != nil {
		return Release{}, inconsistent("the release " + quoteShort(string(key)) + " is damaged")
	}
	return Release{RequestID: string(key), Resource: r.RequestID, HolderID: r.HolderID, Fence: r.Fence, At: r.ExpiresAt, SecretHash: r.SecretHash}, nil
}

// Forgettable returns up to max request ids of releases made at or before
// millis.
func (b *BoltStore) Forgettable(_ context.Context, millis float64, limit int) ([]string, error) {
	b.ovMu.RLock()
	defer b.ovMu.RUnlock()
	out := dueKeys(b.ovRels, func(e *ovRelease) bool { return !e.del && e.rel.At <= millis }, limit)
	return b.dueIn(bucketReleased, func(k []byte) bool { return b.ovRels[string(k)] != nil }, millis, limit, out)
}

// Expired returns up to max resources whose record expires at or before
// millis.
func (b *BoltStore) Expired(_ context.Context, millis float64, limit int) ([]string, error) {
	b.ovMu.RLock()
	defer b.ovMu.RUnlock()
	out := dueKeys(b.ovLeases, func(e *ovLease) bool { return !e.del && e.rec.ExpiresAt <= millis }, limit)
	return b.dueIn(bucketLeases, func(k []byte) bool { return b.ovLeases[string(k)] != nil }, millis, limit, out)
}

// dueIn appends to out, up to limit in all, the keys of bucket whose
// record's instant (a release's time, a lease's expiry: bytes 9 to 17 of
// both encodings) is at or before millis, skipping keys the in-memory
// overlay has (the caller counted those) and records too short to hold an
// instant (Load refused such a record; Get reports it).
func (b *BoltStore) dueIn(bucket []byte, inOverlay func(k []byte) bool, millis float64, limit int, out []string) ([]string, error) {
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(v) < 17 || inOverlay(k) {
				continue
			}
			if math.Float64frombits(binary.BigEndian.Uint64(v[9:17])) <= millis {
				out = append(out, string(k))
			}
		}
		return nil
	})
	return out, err
}

// encodeRecord lays a record out as: version (1 byte), fence (8), expiry
// as float64 bits (8), secret hash (32), then the holder id and the request
// id, each as a uvarint length and its bytes. The resource is the key.
func encodeRecord(r Record) []byte {
	b := make([]byte, 0, 1+8+8+32+2*binary.MaxVarintLen16+len(r.HolderID)+len(r.RequestID))
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, r.Fence)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.ExpiresAt))
	b = append(b, r.SecretHash[:]...)
	b = binary.AppendUvarint(b, uint64(len(r.HolderID)))
	b = append(b, r.HolderID...)
	b = binary.AppendUvarint(b, uint64(len(r.RequestID)))
	return append(b, r.RequestID...)
}

func decodeRecord(key, v []byte) (Record, error) {
	at := "the record of " + quoteShort(string(key))
	if len(v) < 1+8+8+32 || v[0] != recordVersion {
		return Record{}, inconsistent(at + " is damaged (" + strconv.Itoa(len(v)) + " bytes)")
	}
	r := Record{
		Resource:  string(key),
		Fence:     binary.BigEndian.Uint64(v[1:9]),
		ExpiresAt: math.Float64frombits(binary.BigEndian.Uint64(v[9:17])),
	}
	copy(r.SecretHash[:], v[17:49])
	rest := v[49:]
	var ok bool
	if r.HolderID, rest, ok = readLenString(rest); !ok {
		return Record{}, inconsistent(at + " is damaged (holder id)")
	}
	if r.RequestID, rest, ok = readLenString(rest); !ok {
		return Record{}, inconsistent(at + " is damaged (request id)")
	}
	if len(rest) != 0 {
		return Record{}, inconsistent(at + " has " + strconv.Itoa(len(rest)) + " trailing bytes")
	}
	return r, nil
}

func readLenString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}
