//go:build !js

// Package wranglerdev holds what Go tests need to talk to a Worker under
// `wrangler dev` reliably.
package wranglerdev

import (
	"bytes"
	"io"
	"net/http"
)

// lostPrefix begins the answer of wrangler dev's proxy when its connection
// to the runtime failed under a request. It says the Worker restarted, but
// the Worker did not (workers-sdk issue 14641: a kept-alive connection
// closed by the runtime as the proxy reused it); the proxy sends GET and
// HEAD again itself, and answers other methods with this 503.
const lostPrefix = "Your worker restarted mid-request"

// attempts is how many times a request is sent in all.
const attempts = 3

// Transport sends a request that wrangler dev's proxy answered with that
// 503 again, up to 3 times in all, and passes every other answer on as it
// is. A request whose kept-alive connection was closed before its answer
// is sent again by net/http. Only a request whose body can be had again
// (GetBody, as http.NewRequest sets for bytes and strings readers) is sent
// again. The lease service's calls carry their request id, so a call sent
// twice is answered as one.
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := req.Header["Idempotency-Key"]; !ok && (req.Body == nil || req.GetBody != nil) {
		// A kept-alive connection that wrangler dev closes as it is reused
		// (the request written, no answer: EOF) is one net/http sends a
		// replayable request again on by itself; the key's nil value marks
		// a call replayable without sending the header.
		req = req.Clone(req.Context())
		req.Header["Idempotency-Key"] = nil
	}
	for try := 1; ; try++ {
		r := req
		if try > 1 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r = req.Clone(req.Context())
			r.Body = body
		}
		resp, err := base.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || try == attempts || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		head := make([]byte, len(lostPrefix))
		n, _ := io.ReadFull(resp.Body, head)
		if string(head[:n]) != lostPrefix {
			// Not the proxy's: the answer is passed on whole.
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head[:n]), resp.Body), resp.Body}
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
