//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/httpapi"
)

// benchTokens is how many entries the tokens file of the auth side has;
// the benchmark's token is the last (Authenticate compares every entry
// whatever matches, so its place does not matter).
const benchTokens = 10

// benchSide is one configuration of the API listener's handler, over a
// Service in memory of its own.
type benchSide struct {
	name    string
	h       http.Handler
	tok     string
	elapsed time.Duration // wall time
	cpu     time.Duration // the process's CPU time (all threads: GC included)
}

// cpuTime is the CPU time this process used so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func newBenchSide(b *testing.B, name string, metricsOn, authOn bool) *benchSide {
	b.Helper()
	clk, err := service.WallClock("bench")
	if err != nil {
		b.Fatal(err)
	}
	l, err := service.NewLocal(service.LocalConfig{Clock: clk, TTL: time.Hour})
	if err == nil {
		err = l.Load(context.Background())
	}
	if err != nil {
		b.Fatal(err)
	}
	svc, err := service.New(service.Config{TTL: time.Hour, Store: l})
	if err != nil {
		b.Fatal(err)
	}
	sd := &benchSide{name: name}
	if !metricsOn && !authOn {
		sd.h = httpapi.NewHandler(svc, httpapi.HandlerOptions{})
		return sd
	}
	met := newMetrics(svc, storeStats{leases: l.Leases, issued: l.Issued, expired: l.Expired}, newSyncHistogram())
	opts := httpapi.HandlerOptions{Answered: met.answered}
	fr := &front{svc: svc, metrics: met}
	if authOn {
		var file []map[string]any
		for i := range benchTokens {
			sd.tok = "bench-token-" + strconv.Itoa(i) + "-0123456789abcdef0123456789"
			h := sha256.Sum256([]byte(sd.tok))
			file = append(file, map[string]any{"name": "t" + strconv.Itoa(i), "tokenSha256": hex.EncodeToString(h[:]),
				"resources": []string{"*"}, "holders": []string{"*"}})
		}
		data, _ := json.Marshal(file)
		set, err := auth.Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		fr.guard = auth.NewGuard(set, auth.Options{Answered: met.answered})
		opts.Authorize = fr.guard.Authorize
	}
	fr.api = httpapi.NewHandler(svc, opts)
	sd.h = fr.handler()
	return sd
}

// call serves one request and fails the benchmark unless it is answered
// 200; it returns the body.
func (sd *benchSide) call(b *testing.B, path string, body []byte) []byte {
	req, err := http.NewRequest("POST", "http://127.0.0.1"+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Content-Type", "application/json")
	if sd.tok != "" {
		req.Header.Set("Authorization", "Bearer "+sd.tok)
	}
	rec := httptest.NewRecorder()
	sd.h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("%s %s: %d %s", sd.name, path, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// BenchmarkFrontInterleaved: the server's CPU per acquire+release cycle in
// the API listener's handler, in this process (no network, no client):
// the wire handler alone (bare), with the metrics as every server has them
// (metrics), and with tokens as well (auth+metrics: a tokens file of
// benchTokens entries). The sides take turns in chunks of 200 cycles, so a
// load spike on this shared machine hits them alike. Per cycle (two
// calls): cpu-ns/<side> is the process's CPU time (the garbage collector's
// included; the time spent waiting for a core on a loaded machine not) and
// ns/<side> the wall time; the ratios are of CPU time, against bare and
// against metrics.
func BenchmarkFrontInterleaved(b *testing.B) {
	sides := []*benchSide{
		newBenchSide(b, "bare", false, false),
		newBenchSide(b, "metrics", true, false),
		newBenchSide(b, "auth+metrics", true, true),
	}
	// The server's garbage collector target (setGCPercent).
	defer debug.SetGCPercent(debug.SetGCPercent(defaultGCPercent))
	const chunk = 200
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i += chunk {
		for j := range sides {
			sd := sides[(j+i/chunk)%len(sides)]
			start, cpu0 := time.Now(), cpuTime(b)
			for k := range chunk {
				c := strconv.Itoa(i + k)
				res := "r-" + c
				acq := []byte(`{"requestId":"a` + c + `","resource":"` + res + `","holderId":"h","sentAt":{"millis":1,"domain":"h"},"kind":"acquire","secret":"bench-secret-0123456789"}`)
				var reply struct {
					Grant struct {
						Fence uint64 `json:"fence"`
					} `json:"grant"`
				}
				if err := json.Unmarshal(sd.call(b, "/v1/acquire", acq), &reply); err != nil || reply.Grant.Fence == 0 {
					b.Fatalf("%s: acquire: %v %+v", sd.name, err, reply)
				}
				rel := []byte(`{"requestId":"r` + c + `","resource":"` + res + `","holderId":"h","fence":` +
					strconv.FormatUint(reply.Grant.Fence, 10) + `,"secret":"bench-secret-0123456789"}`)
				sd.call(b, "/v1/release", rel)
			}
			sd.elapsed += time.Since(start)
			sd.cpu += cpuTime(b) - cpu0
		}
		n += chunk
	}
	b.StopTimer()
	for _, sd := range sides {
		b.ReportMetric(float64(sd.elapsed.Nanoseconds())/float64(n), "ns/"+sd.name)
		b.ReportMetric(float64(sd.cpu.Nanoseconds())/float64(n), "cpu-ns/"+sd.name)
	}
	b.ReportMetric(float64(sides[1].cpu)/float64(sides[0].cpu), "metrics/bare")
	b.ReportMetric(float64(sides[2].cpu)/float64(sides[1].cpu), "auth/metrics")
}
