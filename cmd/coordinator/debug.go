//go:build !js && !wasip1

package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strconv"

	"github.com/lease-fence/lease-fence/service"
	"github.com/prometheus/procfs"
)

// listenDebug listens on addr, which must be a loopback address: the debug
// endpoints (memory figures, the waiting calls and the runtime's profiles)
// are for the operator, the benchmarks and the tests, not for holders.
func listenDebug(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errors.New("-debug-addr: " + err.Error())
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("-debug-addr must be a loopback address, got " + strconv.Quote(addr))
	}
	return net.Listen("tcp", addr)
}

// memory is the answer of GET /debug/memory.
type memory struct {
	// RSSBytes is the resident set size before the collection (VmRSS).
	RSSBytes int64 `json:"rssBytes"`
	// LiveHeapBytes is the heap in use right after a full collection.
	LiveHeapBytes uint64 `json:"liveHeapBytes"`
	HeapSysBytes  uint64 `json:"heapSysBytes"`
	Goroutines    int    `json:"goroutines"`
	Records       int    `json:"records"`
}

func debugHandler(records func() int, svc *service.Service) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/waiting", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(svc.WaitStats(r.URL.Query()["resource"]...))
	})
	mux.HandleFunc("GET /debug/memory", func(w http.ResponseWriter, _ *http.Request) {
		m := memory{RSSBytes: rss(), Goroutines: runtime.NumGoroutine(), Records: records()}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m.LiveHeapBytes, m.HeapSysBytes = ms.HeapAlloc, ms.HeapSys
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
	})
	// The Go runtime's profiles (go tool pprof http://ADDR/debug/pprof/profile).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// rss is VmRSS from /proc/self/status (Linux), or -1.
func rss() int64 {
	p, err := procfs.Self()
	if err != nil {
		return -1
	}
	st, err := p.NewStatus()
	if err != nil {
		return -1
	}
	return int64(st.VmRSS)
}
