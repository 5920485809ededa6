package httpfence

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/lease-fence/lease-fence/core/fence"
)

// TokenSource gives the token a write is sent under. *lease.Lease and
// lease.Grant are TokenSources; TokenFunc adapts a function.
type TokenSource interface {
	Token() fence.Token
}

// TokenFunc is a function used as a TokenSource, e.g. one that returns the
// token of whichever lease the caller holds at the moment.
type TokenFunc func() fence.Token

// Token calls f.
func (f TokenFunc) Token() fence.Token { return f() }

// Transport is an http.RoundTripper that sends every write (any method but
// GET, HEAD and OPTIONS) with a Lease-Fence header for Source's token, and
// every read unchanged:
//
//	client := &http.Client{Transport: &httpfence.Transport{Source: lease}}
//	resp, err := client.Post(proxyURL+"/deploy", "application/json", body)
//	if stale := httpfence.StaleFence(resp); stale != nil { /* a newer holder wrote first */ }
//
// A token that cannot be sent (see FormatHeader) fails the request with a
// *fence.ArgumentError before anything is sent. Answers come back as they
// are, whatever their status: see StaleFence and ProxyError for reading the
// proxy's own.
type Transport struct {
	// Source gives the token of each write; it is asked once per request.
	Source TokenSource
	// Base sends the request; nil means http.DefaultTransport.
	Base http.RoundTripper
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req, with the header when it is a write. req is not
// modified: a write is sent as a shallow copy with its own headers.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, &fence.ArgumentError{Pkg: "httpfence", Arg: "request", Reason: "must not be nil"}
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if !IsWrite(req.Method) {
		return base.RoundTrip(req)
	}
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	if t.Source == nil {
		closeBody()
		return nil, &fence.ArgumentError{Pkg: "httpfence", Arg: "Transport.Source", Reason: "must not be nil"}
	}
	v, err := FormatHeader(t.Source.Token())
	if err != nil {
		closeBody() // a RoundTripper closes the body, even on errors
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set(Header, v)
	return base.RoundTrip(out)
}

// ProxyError returns the JSON error of an answer the proxy made itself (it
// carries the Lease-Fence-Error header), or nil for an answer that came from
// the upstream. It reads the body and puts an equal one back, so the
// response can still be read.
func ProxyError(resp *http.Response) *ErrorBody {
	if resp == nil || resp.Header.Get(ErrorHeader) == "" {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var b ErrorBody
	if err != nil || json.Unmarshal(body, &b) != nil || b.Error.Code == "" {
		b = ErrorBody{}
		b.Error.Code = resp.Header.Get(ErrorHeader)
		b.Error.Message = "the proxy's answer (" + resp.Status + ") could not be read"
	}
	return &b
}

// StaleFence returns the refusal of a write the proxy found stale (status
// 409 with Lease-Fence-Error: stale_fence) as the error a gate returns, or
// nil for any other answer. Call it before closing the body: the rejection
// (with its Seq and the admitted holder) is read from it, and an equal body
// is put back. If the body cannot be read any more, the error is still
// returned, built from the request's Lease-Fence header and the answer's
// Lease-Fence-Floor, with Seq 0 and no admitted holder.
func StaleFence(resp *http.Response) *fence.StaleFenceError {
	if resp == nil || resp.StatusCode != http.StatusConflict || resp.Header.Get(ErrorHeader) != "stale_fence" {
		return nil
	}
	if b := ProxyError(resp); b != nil && b.Error.Rejection != nil {
		return &fence.StaleFenceError{Rejection: b.Error.Rejection.Rejection()}
	}
	var r fence.Rejection
	if resp.Request != nil {
		if tok, err := ParseHeader(resp.Request.Header); err == nil {
			r.Resource, r.RefusedHolderID, r.RefusedFence = tok.Resource, tok.HolderID, tok.Fence
		}
	}
	r.AdmittedFence, _ = strconv.ParseUint(resp.Header.Get(FloorHeader), 10, 64)
	return &fence.StaleFenceError{Rejection: r}
}
