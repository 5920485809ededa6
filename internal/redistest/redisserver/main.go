//go:build !js

// Command redisserver starts a throwaway redis-server (internal/redistest),
// prints its redis:// URL on one line, and then reads commands from its
// standard input, one a line: "restart" kills the server with SIGKILL and
// starts it again on the same data and port, then prints "restarted". It
// stops the server when its standard input closes or it gets SIGINT/SIGTERM.
// The node suite uses it to get the same real server the Go tests use.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lease-fence/lease-fence/internal/redistest"
)

func main() {
	srv, err := redistest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	done := make(chan struct{}, 2)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "restart":
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
