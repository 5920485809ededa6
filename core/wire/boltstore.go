//go:build !js && !wasip1

package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The layout of a state database: a "meta" bucket with the format and the
// fence high-water mark, a "leases" bucket with one record per resource that
// has a lease, keyed by the resource name, and a "released" bucket with the
// releases of the last TTL, keyed by request id.
var (
	bucketMeta     = []byte("meta")
	bucketLeases   = []byte("leases")
	bucketReleased = []byte("released")
	keyFormat      = []byte("format")
	keyIssued      = []byte("issuedFence")
	formatValue    = []byte("lease-fence state v1")
)

// recordVersion is the first byte of every encoded record.
const recordVersion = 1

// BoltStore is a Store in a bbolt database (go.etcd.io/bbolt, etcd's own
// store): one record per resource, and every Apply is one fsync'd
// transaction that also raises the fence high-water mark. Applies that
// arrive while a transaction is being written are written together by the
// next one (group commit), so concurrent callers share an fsync. The cost of
// a change does not depend on how many records exist.
type BoltStore struct {
	db   *bolt.DB
	path string

	mu      sync.Mutex
	queue   []*pendingApply
	waiting int            // changes in queue whose caller waits (Apply, not ApplyLater)
	want    int            // waiting changes at which the committer wants a kick
	closed  bool           // Close was called; the committer finishes the queue and stops
	kick    chan struct{}  // wakes the committer
	stopped chan struct{}  // closed when the committer has stopped
	deleted map[string]int // resources deleted by queued ApplyLater changes not yet written
	failed  error          // the last write failed with this; cleared by a write that succeeds

	// beforeWrite, if set (tests), is called by the committer before each
	// transaction with the changes it is about to write; an error it
	// returns fails that transaction.
	beforeWrite func(batch []Change) error
}

func newBoltStore(db *bolt.DB, path string) *BoltStore {
	b := &BoltStore{db: db, path: path, want: 1, kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		deleted: make(map[string]int)}
	go b.commit()
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
// with a high-water mark of 0. It refuses a path that already exists, so an
// existing state is never started over by mistake.
func CreateBoltStore(path string) (*BoltStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, errors.New("wire: " + path + " already exists; refusing to create a new state over it (start without -init to use it)")
		}
		return nil, errors.New("wire: creating " + path + ": " + err.Error())
	}
	f.Close()
	db, err := bolt.Open(path, 0o600, boltOptions())
	if err != nil {
		_ = os.Remove(path)
		return nil, errors.New("wire: creating " + path + ": " + err.Error())
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
		if err := meta.Put(keyFormat, formatValue); err != nil {
			return err
		}
		return meta.Put(keyIssued, binary.BigEndian.AppendUint64(nil, 0))
	})
	if err != nil {
		db.Close()
		_ = os.Remove(path)
		return nil, errors.New("wire: creating " + path + ": " + err.Error())
	}
	return newBoltStore(db, path), nil
}

// OpenBoltStore opens the state database at path, which must exist (a
// missing file is an error, not a fresh start: a mistyped path must not
// reissue fences). Its contents are checked by Load.
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
	return newBoltStore(db, path), nil
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

// Close writes the changes already queued, stops the committer and closes
// the database. Apply fails after Close.
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
	return b.db.Close()
}

// Load reads and checks everything: the format, the high-water mark, every
// record (its encoding, and that its fence is not above the mark).
func (b *BoltStore) Load(context.Context) (Stored, error) {
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
		if f := meta.Get(keyFormat); !bytes.Equal(f, formatValue) {
			return inconsistent("unknown format " + quoteShort(string(f)))
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
			if !bytes.Equal(k, keyFormat) && !bytes.Equal(k, keyIssued) {
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
	b.mu.Lock()
	gone := b.deleted[resource] > 0
	b.mu.Unlock()
	if gone {
		return Record{}, false, nil // deleted by an ApplyLater change not yet written
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
// written in the next transaction, before the changes of every Apply and
// ApplyLater that comes after it. If that transaction fails, c stays at the
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
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("wire: the state database is closed")
	}
	b.queue = append(b.queue, &pendingApply{c: c})
	for _, name := range c.Delete {
		b.deleted[name]++
	}
	// The first queued change wakes the committer so that it starts
	// waiting laterWait for company; laterMax of them start a write.
	if len(b.queue) == 1 || len(b.queue)-b.waiting >= laterMax {
		b.wake()
	}
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
// share its transaction with; laterMax is how many ApplyLater changes are
// written at once without waiting.
const (
	laterWait = 2 * time.Millisecond
	laterMax  = 64
)

// gatherWait bounds how long the committer waits for more changes before a
// transaction, when the last transactions showed concurrent callers.
const gatherWait = 250 * time.Microsecond

// commit is the committer: it writes every queued change in one fsync'd
// transaction, over and over. Callers whose changes arrive while a
// transaction is being written wait for the next one. The callers a
// transaction answers usually come back with their next change soon (a
// round trip later); without waiting for them, several callers split into
// groups that alternate, each paying its own fsync. So before writing, the
// committer waits up to gatherWait until the queue holds as many waiting
// changes as the last transaction answered plus those that arrived while it
// was being written. A lone caller never waits: it is the only one
// expected. ApplyLater changes have nobody waiting: a queue of only those
// waits up to laterWait for an Apply to come and share the transaction
// (a release is usually followed by an acquisition), unless laterMax of
// them are queued or the store is closing. After a failed transaction the
// ApplyLater changes of it go back to the head of the queue, and the
// committer waits laterWait (doubling, up to a second, while writes keep
// failing) before trying again.
func (b *BoltStore) commit() {
	defer close(b.stopped)
	expect := 1
	backoff := laterWait
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
			t := time.NewTimer(gatherWait)
		gather:
			for b.waiting < expect && !b.closed {
				b.mu.Unlock()
				select {
				case <-b.kick:
					b.mu.Lock()
				case <-t.C:
					b.mu.Lock()
					break gather
				}
			}
			t.Stop()
		}
		batch := b.queue
		b.queue = nil
		answered := b.waiting
		b.waiting = 0
		b.want = 1
		closed := b.closed
		b.mu.Unlock()
		err := b.write(batch)
		b.mu.Lock()
		var retry []*pendingApply
		for _, p := range batch {
			if p.done != nil {
				continue
			}
			if err != nil && !closed {
				retry = append(retry, p)
				continue
			}
			// Written, or dropped by a Close over a failing disk (as a
			// crash would): either way Get reads the database again.
			for _, name := range p.c.Delete {
				if b.deleted[name]--; b.deleted[name] <= 0 {
					delete(b.deleted, name)
				}
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
		for _, p := range batch {
			if p.done != nil {
				p.done <- err
			}
		}
	}
}

// write writes batch in one transaction.
func (b *BoltStore) write(batch []*pendingApply) error {
	if b.beforeWrite != nil {
		cs := make([]Change, len(batch))
		for i, p := range batch {
			cs[i] = p.c
		}
		if err := b.beforeWrite(cs); err != nil {
			return err
		}
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		for _, p := range batch {
			if err := applyChange(tx, p.c); err != nil {
				return err
			}
		}
		return nil
	})
}

func applyChange(tx *bolt.Tx, c Change) error {
	meta := tx.Bucket(bucketMeta)
	cur := meta.Get(keyIssued)
	if len(cur) != 8 {
		return inconsistent("the fence high-water mark is missing")
	}
	hw := max(binary.BigEndian.Uint64(cur), c.IssuedFence)
	for _, r := range c.Put {
		if r.Fence > hw {
			return inconsistent("a record's fence is above the high-water mark")
		}
	}
	if err := meta.Put(keyIssued, binary.BigEndian.AppendUint64(nil, hw)); err != nil {
		return err
	}
	leases := tx.Bucket(bucketLeases)
	for _, r := range c.Put {
		if err := leases.Put([]byte(r.Resource), encodeRecord(r)); err != nil {
			return err
		}
	}
	for _, name := range c.Delete {
		if err := leases.Delete([]byte(name)); err != nil {
			return err
		}
	}
	released := tx.Bucket(bucketReleased)
	for _, r := range c.Released {
		if r.Fence > hw {
			return inconsistent("a release's fence is above the high-water mark")
		}
		if err := released.Put([]byte(r.RequestID), encodeRelease(r)); err != nil {
			return err
		}
	}
	for _, id := range c.Forget {
		v := released.Get([]byte(id))
		if len(v) >= 17 && math.Float64frombits(binary.BigEndian.Uint64(v[9:17])) <= c.ForgetBefore {
			if err := released.Delete([]byte(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Forgettable returns up to max request ids of releases made at or before
// millis.
func (b *BoltStore) Forgettable(_ context.Context, millis float64, limit int) ([]string, error) {
	var out []string
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketReleased).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(v) >= 17 && math.Float64frombits(binary.BigEndian.Uint64(v[9:17])) <= millis {
				out = append(out, string(k))
			}
		}
		return nil
	})
	return out, err
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

// Expired returns up to max resources whose record expires at or before
// millis.
func (b *BoltStore) Expired(_ context.Context, millis float64, limit int) ([]string, error) {
	var out []string
	err := b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLeases).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(v) < 17 {
				continue // Load refused such a record; Get reports it
			}
			if exp := math.Float64frombits(binary.BigEndian.Uint64(v[9:17])); exp <= millis {
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
