// The proxy's own answers: the JSON bodies and errors it writes, and the
// routes under /.lease-fence/ (floors, rejections and their stream, health).

package httpfence

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// RejectionJSON is a refusal as the proxy reports it.
type RejectionJSON struct {
	Seq              uint64 `json:"seq"`
	Resource         string `json:"resource"`
	RefusedHolderID  string `json:"refusedHolderId"`
	RefusedFence     uint64 `json:"refusedFence"`
	AdmittedHolderID string `json:"admittedHolderId"`
	AdmittedFence    uint64 `json:"admittedFence"`
}

func rejectionJSON(r fence.Rejection) RejectionJSON {
	return RejectionJSON{Seq: r.Seq, Resource: r.Resource, RefusedHolderID: r.RefusedHolderID, RefusedFence: r.RefusedFence, AdmittedHolderID: r.AdmittedHolderID, AdmittedFence: r.AdmittedFence}
}

// Rejection returns the fence.Rejection r stands for.
func (r RejectionJSON) Rejection() fence.Rejection {
	return fence.Rejection{Seq: r.Seq, Resource: r.Resource, RefusedHolderID: r.RefusedHolderID, RefusedFence: r.RefusedFence, AdmittedHolderID: r.AdmittedHolderID, AdmittedFence: r.AdmittedFence}
}

// ErrorBody is the JSON of every answer the proxy makes itself that is not
// a success: {"error": {"code", "message"[, "rejection"]}}.
type ErrorBody struct {
	Error struct {
		Code      string         `json:"code"`
		Message   string         `json:"message"`
		Rejection *RejectionJSON `json:"rejection,omitempty"`
	} `json:"error"`
}

func writeStale(w http.ResponseWriter, stale *fence.StaleFenceError) string {
	rj := rejectionJSON(stale.Rejection)
	w.Header().Set(FloorHeader, strconv.FormatUint(stale.AdmittedFence, 10))
	return writeError(w, http.StatusConflict, "stale_fence", stale.Error(), &rj)
}

// writeError answers with the error shape, and returns code.
func writeError(w http.ResponseWriter, status int, code, msg string, rej *RejectionJSON) string {
	var b ErrorBody
	b.Error.Code, b.Error.Message, b.Error.Rejection = code, msg, rej
	w.Header().Set(ErrorHeader, code)
	writeJSON(w, status, b)
	return code
}

func streamed(r fence.Rejection, at time.Time) StreamedRejection {
	return StreamedRejection{At: at.UnixMilli(), Resource: r.Resource, RefusedHolderID: r.RefusedHolderID, RefusedFence: r.RefusedFence, AdmittedHolderID: r.AdmittedHolderID, AdmittedFence: r.AdmittedFence}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		out = []byte(`{"error":{"code":"internal","message":"encoding the answer failed"}}`)
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(out, '\n'))
}

// RejectionsPage is the answer of GET /.lease-fence/rejections.
type RejectionsPage struct {
	Resource   string          `json:"resource"`
	Rejections []RejectionJSON `json:"rejections"`
	// More: refusals after the last of Rejections exist; ask again with
	// after set to its seq.
	More bool `json:"more"`
}

// query is an admin request's query string, checked: members outside
// allowed, a member given twice, or a string that does not parse are
// answered 400 bad_query.
type query struct {
	w   http.ResponseWriter
	q   url.Values
	bad bool
}

func parseQuery(w http.ResponseWriter, r *http.Request, allowed ...string) *query {
	q, err := url.ParseQuery(r.URL.RawQuery)
	qq := &query{w: w, q: q}
	if err != nil {
		qq.fail("the query does not parse: " + err.Error())
		return qq
	}
	for k, vs := range q {
		known := slices.Contains(allowed, k)
		switch {
		case !known && len(allowed) == 0:
			qq.fail(r.URL.Path + " takes no query members, not " + strconv.Quote(k))
		case !known:
			qq.fail("unknown query member " + strconv.Quote(k) + ": " + r.URL.Path + " takes " + strings.Join(allowed, ", "))
		case len(vs) != 1:
			qq.fail(k + " must appear once")
		default:
			continue
		}
		break
	}
	return qq
}

func (q *query) fail(msg string) {
	if !q.bad {
		q.bad = true
		writeError(q.w, http.StatusBadRequest, "bad_query", msg, nil)
	}
}

// name reads a name member (a resource, a cursor, a prefix): at most
// fence.MaxIDBytes bytes, and not empty if required.
func (q *query) name(key string, required bool) string {
	v, set := q.q[key]
	switch {
	case q.bad:
	case !set && required, set && required && v[0] == "":
		q.fail("name one " + key + ": ?" + key + "=NAME")
	case set && len(v[0]) > fence.MaxIDBytes:
		q.fail(key + " must be at most " + strconv.Itoa(fence.MaxIDBytes) + " bytes")
	case set:
		return v[0]
	}
	return ""
}

// seq reads a sequence number member (default 0).
func (q *query) seq(key string) uint64 {
	v, set := q.q[key]
	if q.bad || !set {
		return 0
	}
	n, err := strconv.ParseUint(v[0], 10, 63)
	if err != nil {
		q.fail(key + " must be a sequence number from 0 to 2^63-1")
	}
	return n
}

// limit reads limit, from 1 to most (the default).
func (q *query) limit(most int) int {
	v, set := q.q["limit"]
	if q.bad || !set {
		return most
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || n > most {
		q.fail("limit must be from 1 to " + strconv.Itoa(most))
	}
	return n
}

// FloorsPage is the answer of GET /.lease-fence/floors.
type FloorsPage struct {
	Floors []FloorJSON `json:"floors"`
	// Next, when set, is the cursor of the next page: ask again with
	// after=Next. Absent on the last page.
	Next string `json:"next,omitempty"`
}

// FloorJSON is one resource's floor as GET /.lease-fence/floors lists it.
type FloorJSON struct {
	Resource string `json:"resource"`
	Floor    uint64 `json:"floor"`
	HolderID string `json:"holderId"`
}

// healthProbe is the resource whose floor GET /.lease-fence/healthz reads
// (a query on the floors' table; it need not exist).
const healthProbe = adminPrefix + "healthz"

// HealthTimeout bounds GET /.lease-fence/healthz's read of the store.
const HealthTimeout = 2 * time.Second

// Drain ends the refusal streams and makes GET /.lease-fence/healthz answer
// 503: call it when the server starts shutting down
// (http.Server.RegisterOnShutdown), which otherwise waits for the streams.
func (p *Proxy) Drain() { p.feed.closeAll() }

// serveAdmin answers the proxy's own endpoints.
func (p *Proxy) serveAdmin(w http.ResponseWriter, r *http.Request) {
	only := func(method string) bool {
		if r.Method == method {
			return true
		}
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.URL.Path+" takes "+method, nil)
		return false
	}
	method := http.MethodGet
	if r.URL.Path == adminPrefix+"admit" {
		method = http.MethodPost
	}
	switch r.URL.Path {
	case adminPrefix + "floor", adminPrefix + "rejections", adminPrefix + "admit", adminPrefix + "floors",
		adminPrefix + "healthz", adminPrefix + "metrics", adminPrefix + "rejections/stream":
		if !only(method) {
			return
		}
	default:
		writeError(w, http.StatusNotFound, "not_found", "fence-proxy serves "+adminPrefix+"floor, floors, rejections, rejections/stream, admit, healthz and metrics; nothing under "+adminPrefix+" is forwarded", nil)
		return
	}
	switch r.URL.Path {
	case adminPrefix + "floor":
		q := parseQuery(w, r, "resource")
		res := q.name("resource", true)
		if q.bad {
			return
		}
		f, err := p.store.Floor(r.Context(), res)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "store_failed", "reading the floor failed: "+err.Error(), nil)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Resource string `json:"resource"`
			Floor    uint64 `json:"floor"`
		}{res, f})
	case adminPrefix + "floors":
		q := parseQuery(w, r, "after", "limit", "prefix")
		after, prefix, limit := q.name("after", false), q.name("prefix", false), q.limit(MaxFloorsPage)
		if q.bad {
			return
		}
		fl, ok := p.store.(FloorLister)
		if !ok {
			writeError(w, http.StatusNotImplemented, "not_supported", "the proxy's store cannot list its floors", nil)
			return
		}
		fs, err := fl.FloorsAfter(r.Context(), prefix, after, limit+1)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "store_failed", "reading the floors failed: "+err.Error(), nil)
			return
		}
		page := FloorsPage{Floors: make([]FloorJSON, 0, min(len(fs), limit))}
		if len(fs) > limit {
			fs = fs[:limit]
			page.Next = fs[limit-1].Resource
		}
		for _, f := range fs {
			page.Floors = append(page.Floors, FloorJSON{Resource: f.Resource, Floor: f.Fence, HolderID: f.HolderID})
		}
		writeJSON(w, http.StatusOK, page)
	case adminPrefix + "rejections":
		q := parseQuery(w, r, "resource", "after", "limit")
		res, after, limit := q.name("resource", true), q.seq("after"), q.limit(MaxRejectionsPage)
		if q.bad {
			return
		}
		rs, err := p.store.RejectionsAfter(r.Context(), res, after, limit+1)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "store_failed", "reading the rejections failed: "+err.Error(), nil)
			return
		}
		more := len(rs) > limit
		if more {
			rs = rs[:limit]
		}
		out := make([]RejectionJSON, len(rs))
		for i, x := range rs {
			out[i] = rejectionJSON(x)
		}
		writeJSON(w, http.StatusOK, RejectionsPage{Resource: res, Rejections: out, More: more})
	case adminPrefix + "rejections/stream":
		q := parseQuery(w, r, "after")
		after := q.seq("after")
		if _, set := q.q["after"]; !set && !q.bad && r.Header.Get("Last-Event-ID") != "" {
			n, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 63)
			if err != nil {
				q.fail("Last-Event-ID must be a sequence number from 0 to 2^63-1")
			}
			after = n
		}
		if q.bad {
			return
		}
		p.serveStream(w, r, after)
	case adminPrefix + "healthz":
		if q := parseQuery(w, r); q.bad {
			return
		}
		select {
		case <-p.feed.done:
			writeError(w, http.StatusServiceUnavailable, "shutting_down", "the proxy is shutting down", nil)
			return
		default:
		}
		ctx, cancel := context.WithTimeout(r.Context(), HealthTimeout)
		defer cancel()
		if _, err := p.store.Floor(ctx, healthProbe); err != nil {
			writeError(w, http.StatusServiceUnavailable, "store_failed", "the state store does not answer: "+err.Error(), nil)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"ok"})
	case adminPrefix + "metrics":
		if q := parseQuery(w, r); q.bad {
			return
		}
		p.metricsHandler.ServeHTTP(w, r)
	case adminPrefix + "admit":
		if q := parseQuery(w, r); q.bad {
			return
		}
		tok, err := ParseHeader(r.Header)
		if errors.Is(err, ErrNoHeader) {
			writeError(w, http.StatusPreconditionRequired, "missing_fence", "admit needs a "+Header+" header naming the token to admit", nil)
			return
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_fence_header", err.Error(), nil)
			return
		}
		if err := p.admitted(context.WithoutCancel(r.Context()), tok); err != nil {
			var stale *fence.StaleFenceError
			if errors.As(err, &stale) {
				p.m.refusal("stale_fence")
				p.log.LogAttrs(r.Context(), slog.LevelWarn, "stale admit refused",
					slog.String("resource", tok.Resource), slog.String("holder", tok.HolderID), slog.Uint64("fence", tok.Fence),
					slog.Uint64("seq", stale.Seq), slog.String("admittedHolderId", stale.AdmittedHolderID), slog.Uint64("admittedFence", stale.AdmittedFence))
				writeStale(w, stale)
				return
			}
			writeError(w, http.StatusServiceUnavailable, "store_failed", "the floor could not be raised: "+err.Error(), nil)
			return
		}
		w.Header().Set(FloorHeader, strconv.FormatUint(tok.Fence, 10))
		writeJSON(w, http.StatusOK, struct {
			Resource string `json:"resource"`
			Holder   string `json:"holder"`
			Fence    uint64 `json:"fence"`
		}{tok.Resource, tok.HolderID, tok.Fence})
	}
}
