//go:build !js

// Command pgserver starts a throwaway PostgreSQL server (test/rig/pgtest),
// with fsync and synchronous commits when given -durable (benchmarks),
// prints its postgres:// URL on one line, then reads commands from its
// standard input, one a line: "restart" stops the server as a crash would
// (pg_ctl stop -m immediate) and starts it again on the same data and port,
// then prints "restarted" (or "restart failed"). It stops the server when
// its standard input closes or it gets SIGINT/SIGTERM. Tests in other
// languages (the node suite) use it to get the same real server the Go
// tests use.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

func main() {
	durable := flag.Bool("durable", false, "keep fsync and synchronous_commit on")
	flag.Parse()
	srv, err := pgtest.Start(pgtest.Options{Durable: *durable})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rigproc.Serve(srv.URL(""), srv.Restart, srv.Stop)
}
