//go:build !js

// Command pgserver starts a throwaway PostgreSQL server (internal/testrig/pgtest),
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
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lease-fence/lease-fence/internal/testrig/pgtest"
)

func main() {
	durable := flag.Bool("durable", false, "keep fsync and synchronous_commit on")
	flag.Parse()
	srv, err := pgtest.Start(pgtest.Options{Durable: *durable})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URL(""))
	done := make(chan struct{}, 2)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "restart" {
				if err := srv.Restart(); err != nil {
					fmt.Fprintln(os.Stderr, err)
					fmt.Println("restart failed")
					continue
				}
				fmt.Println("restarted")
			}
		}
		done <- struct{}{}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; done <- struct{}{} }()
	<-done
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
