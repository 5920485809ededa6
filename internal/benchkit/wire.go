package benchkit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
)

// The lease service's requests as a minimal client writes them, with no
// lease.Client (a benchmark has nobody to hide the secret from).

// AcquireBody is the body of POST /v1/acquire; waitMillis 0 waits not.
func AcquireBody(requestID, resource, holder, secret string, sentAt, waitMillis int64) string {
	b := `{"requestId":"` + requestID + `","resource":"` + resource + `","holderId":"` + holder +
		`","sentAt":{"millis":` + strconv.FormatInt(sentAt, 10) + `,"domain":"` + holder + `"},"kind":"acquire","secret":"` + secret + `"`
	if waitMillis > 0 {
		b += `,"waitMillis":` + strconv.FormatInt(waitMillis, 10)
	}
	return b + "}"
}

// A Poster posts a JSON body to a path of the lease service and returns
// the answer's body (see Answer).
type Poster func(path, body string) ([]byte, error)

// Post is the Poster of hc to the service at url.
func Post(hc *http.Client, url string) Poster {
	return func(path, body string) ([]byte, error) {
		return Answer(hc.Post(url+path, "application/json", strings.NewReader(body)))
	}
}

// Answer reads the body of resp, the answer to a call, and closes it; an
// error if there is none or its status is not 200.
func Answer(resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, data)
	}
	return data, err
}

// Acquire posts an acquisition that does not wait and returns the fence
// granted, or an error if it is not a grant.
func (p Poster) Acquire(requestID, resource, holder, secret string, sentAt int64) (uint64, error) {
	data, err := p("/v1/acquire", AcquireBody(requestID, resource, holder, secret, sentAt, 0))
	if err != nil {
		return 0, err
	}
	var r struct {
		OK    bool `json:"ok"`
		Grant struct {
			Fence uint64 `json:"fence"`
		} `json:"grant"`
	}
	if err := json.Unmarshal(data, &r); err != nil || !r.OK {
		return 0, fmt.Errorf("acquire: %s", data)
	}
	return r.Grant.Fence, nil
}

// Release posts the release of fence, and is nil if it ended the lease.
func (p Poster) Release(requestID, resource, holder, secret string, fence uint64) error {
	data, err := p("/v1/release", `{"requestId":"`+requestID+`","resource":"`+resource+`","holderId":"`+holder+
		`","fence":`+strconv.FormatUint(fence, 10)+`,"secret":"`+secret+`"}`)
	if err == nil && string(data) != `{"ok":true}` {
		err = fmt.Errorf("release: %s", data)
	}
	return err
}

// Cycle acquires resource (request id "a"+id) and releases it ("r"+id).
func (p Poster) Cycle(id, resource, holder, secret string, sentAt int64) error {
	fence, err := p.Acquire("a"+id, resource, holder, secret, sentAt)
	if err == nil {
		err = p.Release("r"+id, resource, holder, secret, fence)
	}
	return err
}

// Memory is what the coordinator's debug server reports: its resident set
// (VmRSS) before a full collection, and what is live after it.
type Memory struct {
	RSSBytes      int64  `json:"rssBytes"`
	LiveHeapBytes uint64 `json:"liveHeapBytes"`
	Records       int    `json:"records"`
	Goroutines    int    `json:"goroutines"`
}

// ReadMemory reads the memory the coordinator's debug server at debugURL
// reports.
func ReadMemory(debugURL string) (Memory, error) {
	var m Memory
	resp, err := http.Get(debugURL + "/debug/memory")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&m)
	return m, err
}

// NewClient is a client.Client of cfg for holder, with a monotonic clock
// of the holder's own domain and the clock skew skew.
func NewClient(holder string, skew time.Duration, cfg client.Config) (*client.Client, error) {
	clk, err := clock.NewMonotonic(holder)
	if err != nil {
		return nil, err
	}
	if cfg.Lease, err = lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: holder, ClockSkew: skew}); err != nil {
		return nil, err
	}
	return client.New(cfg)
}
