package httpfence

import "github.com/lease-fence/lease-fence/core/fence"

// Waiting returns how many writes wait for their turn on resource (those
// running not counted), for tests that order on it.
func (p *Proxy) Waiting(resource string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.lanes[resource]; l != nil {
		return l.waiting
	}
	return 0
}

// ParseDictionary is ParseHeaderValue without its reading of the value
// FormatHeader writes (httpsfv's parse alone), for FuzzParseHeader to
// compare the two.
func ParseDictionary(v string) (fence.Token, error) { return parseDictionary(v) }

// NewBroken returns a Proxy with the deliberate break of the conformance
// tests: a raise does not wait for the writes in flight.
func NewBroken(opts Options) (*Proxy, error) {
	p, err := New(opts)
	if p != nil {
		p.breakRaise = true
	}
	return p, err
}

// Lanes returns how many resources have a write in progress.
func (p *Proxy) Lanes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lanes)
}

// Streams returns how many refusal streams are open.
func (p *Proxy) Streams() int {
	p.feed.mu.Lock()
	defer p.feed.mu.Unlock()
	return len(p.feed.subs)
}

// HistoryLen returns how many refusals the stream history holds.
func (p *Proxy) HistoryLen() int {
	p.feed.mu.Lock()
	defer p.feed.mu.Unlock()
	return len(p.feed.ring)
}
