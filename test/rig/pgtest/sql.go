//go:build !js

package pgtest

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// StartFor starts a server for t, failing t if it cannot, and stops it
// when t ends (an error of Stop fails t).
func StartFor(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// ProxyFor puts a Proxy in front of s for t, failing t if it cannot, and
// closes it when t ends.
func (s *Server) ProxyFor(t testing.TB) *Proxy {
	t.Helper()
	px, err := NewProxy("127.0.0.1:" + strconv.Itoa(s.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px
}

// Exec runs q with args on dsn's database, on a connection of its own,
// failing t on an error.
func Exec(t testing.TB, dsn, q string, args ...any) {
	t.Helper()
	onConn(t, dsn, q, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, q, args...)
		return err
	})
}

// NewDatabase makes a database of its own on s, failing t on an error,
// and returns its name.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := "t" + strconv.FormatInt(s.dbs.Add(1), 10)
	Exec(t, s.DSN(""), "CREATE DATABASE "+name)
	return name
}

// QueryRow scans the one row q returns into dest, on a connection of its
// own, failing t on an error.
func QueryRow(t testing.TB, dsn, q string, dest ...any) {
	t.Helper()
	onConn(t, dsn, q, func(ctx context.Context, c *pgx.Conn) error { return c.QueryRow(ctx, q).Scan(dest...) })
}

// onConn runs fn on a new connection to dsn's database and closes it,
// failing t (naming q) on an error.
func onConn(t testing.TB, dsn, q string, fn func(context.Context, *pgx.Conn) error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := fn(ctx, conn); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
