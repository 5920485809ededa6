//go:build !js

// Command redisserver starts a throwaway redis-server (test/rig/redistest),
// or with -cluster N a Redis Cluster of N masters, prints its redis:// URL
// (for a cluster, the nodes' URLs separated by commas) on one line, and
// then reads commands from its
// standard input, one a line: "restart" kills the server with SIGKILL and
// starts it again on the same data and port, then prints "restarted". It
// stops the server when its standard input closes or it gets SIGINT/SIGTERM.
// The node suite uses it to get the same real server the Go tests use.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/lease-fence/lease-fence/test/rig/redistest"
	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

func main() {
	nodes := flag.Int("cluster", 0, "start a Redis Cluster of this many masters instead of one server")
	flag.Parse()
	if *nodes > 0 {
		cluster(*nodes)
		return
	}
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rigproc.Serve(srv.URL(), srv.Restart, srv.Stop)
}

// cluster serves a cluster until standard input closes ("restart" is not
// offered for a cluster).
func cluster(n int) {
	c, err := redistest.StartCluster(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var urls []string
	for _, a := range c.Addrs() {
		urls = append(urls, "redis://"+a)
	}
	rigproc.Serve(strings.Join(urls, ","), nil, c.Stop)
}
