//go:build !js

package pgtest

import (
	"io"
	"net"
	"strconv"
	"sync"
)

// Proxy forwards TCP connections from a loopback port to a target address
// and can stop forwarding, as a network partition does: the connections
// stay open (no FIN, no RST) and what is sent is held, not delivered, until
// Heal, so each side sees the other go silent.
type Proxy struct {
	ln     net.Listener
	target string
	up     func(i int, target, client net.Conn) // nil: pump

	mu      sync.Mutex
	cond    *sync.Cond
	hold    [2]bool // [0]: client to target, [1]: target to client
	conns   []net.Conn
	closed  bool
	pumping sync.WaitGroup
	n       int // connections accepted
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) { return NewProxyWith(target, nil) }

// NewProxyWith is NewProxy whose client-to-target direction of the i-th
// connection (from 0) is up(i, target, client) instead of a copy that
// Partition holds: a test cuts or resets connections there. Both ends are
// closed once up returns.
func NewProxyWith(target string, up func(i int, target, client net.Conn)) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, up: up}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Port is the port the proxy listens on.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port()) }

// Partition stops forwarding in both directions.
func (p *Proxy) Partition() { p.set(true, true) }

// PartitionReplies stops forwarding from the target back to the clients
// only: requests arrive, answers do not.
func (p *Proxy) PartitionReplies() { p.set(false, true) }

// Heal forwards again, what was held first.
func (p *Proxy) Heal() { p.set(false, false) }

func (p *Proxy) set(toTarget, toClient bool) {
	p.mu.Lock()
	p.hold = [2]bool{toTarget, toClient}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Close stops listening and closes every connection, dropping what is
// held.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.cond.Broadcast()
	err := p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.pumping.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		t, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			t.Close()
			return
		}
		p.conns = append(p.conns, c, t)
		p.pumping.Add(2)
		i := p.n
		p.n++
		p.mu.Unlock()
		if p.up != nil {
			go func() {
				defer p.pumping.Done()
				p.up(i, t, c)
				c.Close()
				t.Close()
			}()
		} else {
			go p.pump(t, c, 0)
		}
		go p.pump(c, t, 1)
	}
}

// pump copies from src to dst, holding each chunk while direction dir is
// partitioned.
func (p *Proxy) pump(dst, src net.Conn, dir int) {
	defer p.pumping.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.hold[dir] && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}
