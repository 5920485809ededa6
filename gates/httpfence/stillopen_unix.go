//go:build unix

package httpfence

import (
	"net"
	"syscall"
)

// stillOpen reports whether the peer of an idle connection has not closed
// it: a one-byte peek that does not wait (recv with MSG_PEEK|MSG_DONTWAIT)
// finds nothing to read. End of stream, an error, or bytes nobody asked for
// mean it cannot be used.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n < 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return err == nil && open
}
