//go:build !js

// Command gatecli is a Go writer for the JavaScript tests that check Go and
// JavaScript writers share one floor, and for scripts/bench-gates.mjs: it
// opens gates/sqlfence on a PostgreSQL URL or on "sqlite:PATH" (WAL,
// synchronous=FULL, as fence-proxy keeps its state), or gates/redisfence on
// "redis://host:port prefix", then
// reads one JSON request a line from standard input and answers one JSON
// line each (with -texts TABLE instead, it prints the texts the gates send:
// see texts):
//
//	{"op": "commit"|"admit"|"floor"|"rejections", "resource", "holder", "fence", "value"}
//	-> {"ok": true} | {"stale": {seq, resource, ...}} | {"error": "..."} | {"floor": n} | {"rejections": [...]}
//	{"op": "bench", "resource", "writers", "n", "fenced", "deadline"} -> {"rate": commits per second}
//
// bench makes n commits with the given number of concurrent writers, all
// with one token (every commit admitted), through the gate or, unfenced, as
// the same write alone (one transaction with the INSERT; the RPUSH alone);
// with deadline, each fenced commit's context has a deadline a minute away
// (context.WithTimeout, as most callers' contexts have one), else it is
// context.Background().
//
// A commit appends value to the resource's values (the table
// gatetest_values, or the list {resource}:<prefix>values) as its write, as
// test/gates/adapters.mjs does.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/redisfence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

type request struct {
	Writers  int    `json:"writers"`
	N        int    `json:"n"`
	Fenced   bool   `json:"fenced"`
	Deadline bool   `json:"deadline"` // bench: each commit's context has a deadline
	Op       string `json:"op"`
	Resource string `json:"resource"`
	Holder   string `json:"holder"`
	Fence    uint64 `json:"fence"`
	Value    string `json:"value"`
}

type gate struct {
	plain      func(ctx context.Context, resource, value string) error // the same write, unfenced
	commit     func(ctx context.Context, tok fence.Token, value string) error
	admit      func(ctx context.Context, tok fence.Token) error
	floor      func(ctx context.Context, r string) (uint64, error)
	rejections func(ctx context.Context, r string) ([]fence.Rejection, error)
}

func open(ctx context.Context, addr string) (*gate, error) {
	if url, ns, ok := strings.Cut(addr, " "); ok && strings.HasPrefix(url, "redis://") {
		o, err := redis.ParseURL(url)
		if err != nil {
			return nil, err
		}
		rdb := redis.NewClient(o)
		s, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns})
		if err != nil {
			return nil, err
		}
		return &gate{
			plain: func(ctx context.Context, r, v string) error {
				return rdb.RPush(ctx, redisfence.Key(r, ns+"values"), v).Err()
			},
			commit: func(ctx context.Context, tok fence.Token, v string) error {
				k := redisfence.Key(tok.Resource, ns+"values")
				return s.Commit(ctx, tok, redisfence.Write{Keys: []string{k}, Commands: [][]string{{"RPUSH", k, v}}})
			},
			admit: s.Admit, floor: s.Floor, rejections: s.Rejections,
		}, nil
	}
	driver, dialect := "pgx", sqlfence.Postgres
	insert := `INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)`
	create := `CREATE TABLE IF NOT EXISTS gatetest_values (id BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, value TEXT NOT NULL)`
	if path, ok := strings.CutPrefix(addr, "sqlite:"); ok {
		driver, dialect = "sqlite", sqlfence.SQLite
		addr = "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
		insert = `INSERT INTO gatetest_values (resource, value) VALUES (?, ?)`
		create = `CREATE TABLE IF NOT EXISTS gatetest_values (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, value TEXT NOT NULL)`
	}
	db, err := sql.Open(driver, addr)
	if err != nil {
		return nil, err
	}
	s, err := sqlfence.Open(ctx, db, sqlfence.Options{Dialect: dialect})
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, create); err != nil && dialect == sqlfence.SQLite {
		return nil, err // (PostgreSQL: the JavaScript side may have made it at once)
	}
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	return &gate{
		plain: func(ctx context.Context, r, v string) error {
			var err error
			for range sqlfence.MaxAttempts { // SQLite's busy, as the Store retries it
				var tx *sql.Tx
				if tx, err = db.BeginTx(ctx, nil); err != nil {
					continue
				}
				if _, err = tx.ExecContext(ctx, insert, r, v); err != nil {
					_ = tx.Rollback()
					continue
				}
				if err = tx.Commit(); err == nil {
					return nil
				}
			}
			return err
		},
		commit: func(ctx context.Context, tok fence.Token, v string) error {
			return s.Commit(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, insert, tok.Resource, v)
				return err
			})
		},
		admit: s.Admit, floor: s.Floor, rejections: s.Rejections,
	}, nil
}

// rejection is fence.Rejection in the JavaScript gate's shape.
func rejection(r fence.Rejection) map[string]any {
	var admitted any = r.AdmittedHolderID
	if r.AdmittedHolderID == "" {
		admitted = nil
	}
	return map[string]any{"seq": r.Seq, "resource": r.Resource, "refusedHolderId": r.RefusedHolderID, "refusedFence": r.RefusedFence,
		"admittedHolderId": admitted, "admittedFence": r.AdmittedFence}
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-texts" {
		texts(os.Args[2])
		return
	}
	ctx := context.Background()
	g, err := open(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var q request
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			_ = out.Encode(map[string]any{"error": err.Error()})
			continue
		}
		tok := fence.Token{Resource: q.Resource, HolderID: q.Holder, Fence: q.Fence}
		var ans map[string]any
		switch q.Op {
		case "commit", "admit":
			if q.Op == "commit" {
				err = g.commit(ctx, tok, q.Value)
			} else {
				err = g.admit(ctx, tok)
			}
			var se *fence.StaleFenceError
			switch {
			case err == nil:
				ans = map[string]any{"ok": true}
			case errors.As(err, &se):
				ans = map[string]any{"stale": rejection(se.Rejection), "message": se.Error()}
			default:
				ans = map[string]any{"error": err.Error()}
			}
		case "floor":
			f, err := g.floor(ctx, q.Resource)
			ans = map[string]any{"floor": f}
			if err != nil {
				ans = map[string]any{"error": err.Error()}
			}
		case "rejections":
			rs, err := g.rejections(ctx, q.Resource)
			list := []map[string]any{}
			for _, r := range rs {
				list = append(list, rejection(r))
			}
			ans = map[string]any{"rejections": list}
			if err != nil {
				ans = map[string]any{"error": err.Error()}
			}
		case "bench":
			rate, err := bench(ctx, g, q)
			ans = map[string]any{"rate": rate}
			if err != nil {
				ans = map[string]any{"error": err.Error()}
			}
		default:
			ans = map[string]any{"error": "unknown op " + q.Op}
		}
		_ = out.Encode(ans)
	}
}

// bench makes q.N writes with q.Writers concurrent writers and returns
// writes per second.
func bench(ctx context.Context, g *gate, q request) (float64, error) {
	tok := fence.Token{Resource: q.Resource, HolderID: "bench", Fence: 1}
	var left atomic.Int64
	left.Store(int64(q.N))
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := range max(q.Writers, 1) {
		wg.Go(func() {
			for i := 0; left.Add(-1) >= 0; i++ {
				v := fmt.Sprintf("bench#%d#%d", w, i)
				var err error
				if q.Fenced && q.Deadline {
					c, cancel := context.WithTimeout(ctx, time.Minute)
					err = g.commit(c, tok, v)
					cancel()
				} else if q.Fenced {
					err = g.commit(ctx, tok, v)
				} else {
					err = g.plain(ctx, q.Resource, v)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	return float64(q.N) / elapsed.Seconds(), nil
}

// texts prints, as one JSON object, the texts Go's gates send for table:
// {"fence": fence.lua, "page": page.lua, "postgres": {name: statement},
// "limits": {name: core/fence's limit}}, for the test that checks
// lease-fence/redis and lease-fence/sql send the same bytes and check the
// same limits (test/gates/texts.test.mjs).
func texts(table string) {
	statements, err := sqlfence.Statements(sqlfence.Options{Dialect: sqlfence.Postgres, Table: table})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	limits := map[string]int{"MAX_ID_BYTES": fence.MaxIDBytes, "DEFAULT_MAX_REJECTIONS": fence.DefaultMaxRejections,
		"MAX_MAX_REJECTIONS": fence.MaxMaxRejections, "MAX_REJECTIONS_PAGE": sqlfence.MaxRejectionsPage}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"fence": redisfence.Script(), "page": redisfence.PageScript(), "postgres": statements, "limits": limits})
}
