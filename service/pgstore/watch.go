//go:build !js && !wasip1

package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/wire"
)

// notifyChannel is the channel a Store notifies of its grants and releases
// (LISTEN/NOTIFY): the payload is the notifying Store's id, a colon, and
// the resource.
const notifyChannel = "lease_fence"

// WatchPoll is how often a Store reports every watched resource while it
// cannot hear the other replicas' notifications (its LISTEN connection is
// down, or not yet up): a waiter here is then handed a resource released
// elsewhere within a poll.
const WatchPoll = 100 * time.Millisecond

// watchSafety is how often a Store reports every watched resource even
// while it hears notifications: a replica that died between its commit
// and its notification leaves a waiter elsewhere waiting at most this
// long (or until the lease's expiry, which the Service times itself).
const watchSafety = 2 * time.Second

// listenHeartbeat is how long the LISTEN connection may stay silent before
// it is asked whether it is still there (a cut link sends no error).
const listenHeartbeat = 5 * time.Second

// listenFor is how long a listening coordinator's mark (qListening) lasts;
// it marks again every listenFor/3 while it listens, on its LISTEN
// connection (if it cannot, the connection is down and the coordinator
// is deaf: it polls).
const listenFor = 60 * time.Second

// notifyLinger is how long the first notification of a batch waits for
// others to join it: one statement for many changes, for a few
// milliseconds more before the other replicas hear of them.
const notifyLinger = 2 * time.Millisecond

// notifyBatch bounds the notifications one statement sends; notifyQueue
// the ones waiting to be sent (beyond, they are dropped: watchSafety
// covers a waiter's, and a dropped event is missing from the other
// replicas' streams).
const (
	notifyBatch = 256
	notifyQueue = 16 * notifyBatch
)

// watcher is one Watch. Its lock is held while fn runs, so that once stop
// has returned fn is not called again.
type watcher struct {
	mu sync.Mutex
	fn func()
}

func (w *watcher) call() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fn != nil {
		w.fn()
	}
}

// watching is the state of a Store's watches: who watches what, the
// connection that listens, and the notifications waiting to be sent.
type watching struct {
	mu       sync.Mutex
	by       map[string][]*watcher
	started  bool // listen and pollWatched run
	closed   bool
	deaf     bool // the LISTEN connection is down: report on the poll
	stop     chan struct{}
	done     sync.WaitGroup
	outbox   chan string  // resources whose grants and releases to notify
	notified atomic.Int64 // how many notify queued (tests)
	poll     time.Duration
	safety   time.Duration
	beat     time.Duration // listenHeartbeat
	blocked  atomic.Bool   // tests: the listener may not connect
	listenPC chan struct{} // closed when the listener first listens (tests; nil after)
	// heard is what the last decision read of the listening mark: whether
	// some coordinator listens, so events are worth sending.
	heard atomic.Bool
	// receive is given the events of the other replicas (ShareEvents).
	receive func(wire.Event)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Watch calls fn whenever resource's row may have been changed by another
// coordinator process (service.Store): a grant or a release another Store
// made, reported by a NOTIFY that Store sends once its change is
// committed, heard on one LISTEN connection per Store. While that
// connection is down (and until it first listens) every watched resource
// is reported every WatchPoll, and once more when it listens again; and,
// in case a replica died between its commit and its notification, every
// two seconds anyway.
func (s *Store) Watch(resource string, fn func()) (stop func()) {
	w := &watcher{fn: fn}
	s.watch.mu.Lock()
	if s.watch.by == nil {
		s.watch.by = map[string][]*watcher{}
	}
	s.watch.by[resource] = append(s.watch.by[resource], w)
	if !s.watch.started && !s.watch.closed {
		s.watch.started, s.watch.deaf = true, true
		s.watch.done.Add(2)
		go s.listen()
		go s.pollWatched()
	}
	s.watch.mu.Unlock()
	return func() {
		s.watch.mu.Lock()
		ws := s.watch.by[resource]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(s.watch.by, resource)
		} else {
			s.watch.by[resource] = ws
		}
		s.watch.mu.Unlock()
		w.mu.Lock() // waits for a call in progress
		w.fn = nil
		w.mu.Unlock()
	}
}

// report calls the watchers of resource, or of every watched resource if
// resource is "".
func (s *Store) report(resource string) {
	s.watch.mu.Lock()
	var ws []*watcher
	for r, rws := range s.watch.by {
		if resource == "" || r == resource {
			ws = append(ws, rws...)
		}
	}
	s.watch.mu.Unlock()
	for _, w := range ws {
		w.call()
	}
}

// pollWatched reports every watched resource every poll while the store
// is deaf, and every safety interval regardless.
func (s *Store) pollWatched() {
	defer s.watch.done.Done()
	t := time.NewTicker(s.watch.poll)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.watch.stop:
			return
		case <-t.C:
		}
		s.watch.mu.Lock()
		deaf := s.watch.deaf
		s.watch.mu.Unlock()
		if deaf || time.Since(last) >= s.watch.safety {
			last = time.Now()
			s.report("")
		}
	}
}

// listen keeps one connection listening on the channel and reports what
// it hears; when it fails, it marks the store deaf and connects again.
func (s *Store) listen() {
	defer s.watch.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.watch.stop
		cancel()
	}()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := s.listenOnce(ctx)
		s.watch.mu.Lock()
		s.watch.deaf = true
		s.watch.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("not hearing the other replicas' changes (LISTEN): reporting every watched resource on a poll", "err", err)
		t := time.NewTimer(min(time.Duration(attempt+1)*s.watch.poll, 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *Store) listenOnce(ctx context.Context) error {
	if s.watch.blocked.Load() {
		return errors.New("pgstore: listening is blocked (test)")
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	conn, err := connect(cctx, s.connConfig)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The mark first: from its commit on, every decision that reads it
	// notifies (see Store.write); then LISTEN; then every watched resource
	// is decided again (report below).
	if _, err := conn.Exec(ctx, qListening); err != nil {
		return err
	}
	marked := time.Now()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	s.watch.mu.Lock()
	s.watch.deaf = false
	if s.watch.listenPC != nil {
		close(s.watch.listenPC)
		s.watch.listenPC = nil
	}
	s.watch.mu.Unlock()
	// What changed while nobody listened is not known: report it all once.
	s.report("")
	mine := s.id + ":"
	// The events of the other replicas from here on; what they decided
	// while nobody listened is not known (a watcher that resumes across
	// that gap is told to reload: see ShareEvents).
	for {
		if time.Since(marked) >= listenFor/3 {
			pctx, cancel := context.WithTimeout(ctx, s.timeout)
			_, err := conn.Exec(pctx, qListening)
			cancel()
			if err != nil {
				return err
			}
			marked = time.Now()
		}
		wctx, cancel := context.WithTimeout(ctx, s.watch.beat)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && pgconn.Timeout(err) {
			// Silent for a heartbeat: is the connection still there? (A
			// timeout leaves it usable.)
			pctx, cancel := context.WithTimeout(ctx, s.timeout)
			_, err = conn.Exec(pctx, "SELECT 1")
			cancel()
			if err == nil {
				continue
			}
		}
		if err != nil {
			return err
		}
		if strings.HasPrefix(n.Payload, mine) || strings.HasPrefix(n.Payload, s.id+";") {
			continue // this Store's own change: its Update already told the Service
		}
		if i := strings.IndexAny(n.Payload, ":;"); i >= 0 && n.Payload[i] == ';' {
			s.received(n.Payload[i+1:])
		} else if i >= 0 {
			s.report(n.Payload[i+1:])
		}
	}
}

// startWatching makes what Watch and notify need, and starts sending
// notifications. Close stops it.
func (s *Store) startWatching() {
	s.id = newID()
	s.watch.stop = make(chan struct{})
	s.watch.outbox = make(chan string, notifyQueue)
	s.watch.poll, s.watch.safety, s.watch.beat = WatchPoll, watchSafety, listenHeartbeat
	s.watch.listenPC = make(chan struct{})
	s.watch.done.Add(1)
	go s.sendNotifications()
}

// stopWatching stops the goroutines of the watches and notifications and
// waits for them.
func (s *Store) stopWatching() {
	s.watch.mu.Lock()
	if s.watch.closed {
		s.watch.mu.Unlock()
		return
	}
	s.watch.closed = true
	close(s.watch.stop)
	s.watch.mu.Unlock()
	s.watch.done.Wait()
}

// notify queues resource for a notification to the other replicas (its
// grant or release was committed). It never blocks: a full queue drops
// it, and the watchers' safety poll covers what is dropped.
func (s *Store) notify(resource string) {
	s.watch.notified.Add(1)
	select {
	case s.watch.outbox <- s.id + ":" + resource:
	default:
	}
}

// sendNotifications sends what notify queued, in batches, on a connection
// of the pool, outside the decisions' transactions: a NOTIFY inside them
// would take PostgreSQL's notification lock and hold it through each
// commit's wait for the disk, one commit at a time.
func (s *Store) sendNotifications() {
	defer s.watch.done.Done()
	batch := make([]string, 0, notifyBatch)
	for {
		select {
		case <-s.watch.stop:
			return
		case p := <-s.watch.outbox:
			batch = append(batch[:0], p)
		}
		linger := time.NewTimer(notifyLinger)
	more:
		for len(batch) < notifyBatch {
			select {
			case p := <-s.watch.outbox:
				batch = append(batch, p)
			case <-linger.C:
				break more
			case <-s.watch.stop:
				break more
			}
		}
		linger.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		_, err := s.pool.Exec(ctx, `SELECT pg_notify('`+notifyChannel+`', p) FROM unnest($1::text[]) p`, batch)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("notifying the other replicas failed; they learn of these changes on their safety poll", "changes", len(batch), "err", err)
		}
	}
}

// maxPayload bounds a notification's payload (PostgreSQL refuses 8000
// bytes and more).
const maxPayload = 7999

// ReceiveEvents (service.EventSharer): this Store listens from now on (as
// Watch does) and hands receive the events other replicas send.
func (s *Store) ReceiveEvents(receive func(wire.Event)) {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	s.watch.receive = receive
	if !s.watch.started && !s.watch.closed {
		s.watch.started, s.watch.deaf = true, true
		s.watch.done.Add(2)
		go s.listen()
		go s.pollWatched()
	}
}

// SendEvents (service.EventSharer) returns the function that sends this
// replica's events to the others, as notifications on the channel the
// replicas listen on, while some coordinator listens (the listening mark
// its last decision read). An event is sent after its decision committed,
// by one goroutine in the order given; a notification dropped (the queue
// full, a failed send, a replica that died between its commit and its
// send) is missing from the others' streams.
func (s *Store) SendEvents() (send func(wire.Event)) {
	return func(ev wire.Event) {
		if !s.watch.heard.Load() {
			return
		}
		data, err := json.Marshal(ev)
		if err != nil || len(s.id)+1+len(data) > maxPayload {
			return
		}
		select {
		case s.watch.outbox <- s.id + ";" + string(data):
		default:
		}
	}
}

// received hands the event of another replica to the Service.
func (s *Store) received(data string) {
	var ev wire.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type == "" || ev.Resource == "" {
		return
	}
	s.watch.mu.Lock()
	fn := s.watch.receive
	s.watch.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

// ReportExpired (service.ExpiryReporter) makes Sweep call fn with each
// lease record it cleared because it expired, once committed. Call it
// before the Store is used.
func (s *Store) ReportExpired(fn func(expired service.Entry)) { s.onExpired = fn }

var (
	_ service.EventSharer    = (*Store)(nil)
	_ service.ExpiryReporter = (*Store)(nil)
	_ service.Lister         = (*Store)(nil)
)
