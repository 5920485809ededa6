package client

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// BenchmarkClientCycle measures the client's own work for one acquire +
// release cycle (request ids, secret, encoding, HTTP/1.1 over a connection,
// decoding, completing the lease), against a fake server on a net.Pipe that
// answers at once (its work is in the figure too).
func BenchmarkClientCycle(b *testing.B) {
	cli, srv := net.Pipe()
	go func() {
		br := bufio.NewReader(srv)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			n := 0
			for {
				h, _ := br.ReadString('\n')
				if h == "\r\n" {
					break
				}
				if v, ok := strings.CutPrefix(h, "Content-Length: "); ok {
					for _, c := range strings.TrimSpace(v) {
						n = n*10 + int(c-'0')
					}
				}
			}
			body := make([]byte, n)
			_, _ = io.ReadFull(br, body)
			ans := `{"ok":true}`
			if strings.Contains(line, "acquire") {
				ans = `{"ok":true,"grant":{"requestId":"` + string(body[14:46]) + `","resource":"r","holderId":"h","fence":7,"ttlMillis":30000,"coordinatorExpiresAt":{"millis":1796045771114,"domain":"coordinator"}}}`
			}
			_, _ = srv.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(ans)) + "\r\n\r\n" + ans))
		}
	}()
	clk, _ := clock.NewMonotonic("h")
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "h"})
	c, _ := New(Config{BaseURL: "http://coordinator.test", Lease: lc})
	c.conns[0].idle = []*persistConn{{Conn: cli, br: bufio.NewReader(cli)}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Acquire(ctx, "r")
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}
