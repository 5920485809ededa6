package sqlfence

import (
	_ "embed"
	"strings"

	"github.com/lease-fence/lease-fence/internal/sqltext"
)

// statementsSQL is the text of every statement the gate sends, the one
// source shared with JavaScript's lease-fence/sql (see the file's head for
// its form and its tokens).
//
//go:embed statements.sql
var statementsSQL string

// statements are statementsSQL's statements by name, their tokens in place.
var statements = sqltext.Parse(statementsSQL)

// statement returns the statement called name for dialect d over the tables
// floor and rej, its tokens replaced; more holds further token, value pairs.
// A PostgreSQL statement's ? placeholders become $1, $2, ...
func statement(name string, d Dialect, floor, rej string, more ...string) string {
	q, ok := statements[name]
	if !ok {
		panic("sqlfence: statements.sql has no statement " + name)
	}
	greatest, xid := "max", ""
	if d == Postgres {
		greatest, xid = "GREATEST", ", pg_current_xact_id()::text AS xid"
	}
	// more first: NewReplacer uses the first pair of a token given twice.
	r := strings.NewReplacer(append(more, "{floor}", floor, "{rejection}", rej, "{greatest}", greatest, "{xid}", xid,
		"{inserted}", "?", "{raised}", "excluded.fence", "{cmp}", "=")...)
	q = r.Replace(q)
	if d == Postgres {
		q = rebind(q)
	}
	return q
}

// setStatements sets s's statements for opts (its table checked).
func (s *Store) setStatements(opts Options) {
	floor, rej := opts.Table+"_floor", opts.Table+"_rejection"
	s.qFloorTable = statement("floor_table", s.dialect, floor, rej)
	s.qRejectionTable = statement("rejection_table", s.dialect, floor, rej)
	s.qUpsert = upsert(s.dialect, floor, false)
	s.qHasColumn = statement("has_column_sqlite", s.dialect, floor, rej)
	if s.dialect == Postgres {
		s.qHasColumn = statement("has_column_postgres", s.dialect, floor, rej)
		s.qStatus = statement("status", s.dialect, floor, rej)
		if !opts.Exclusive {
			s.qShare, s.qRaiseLock = share(floor, false), raiseLock(floor)
		}
	}
	s.qLogRejection = statement("log_rejection", s.dialect, floor, rej)
	s.qFloor = statement("floor", s.dialect, floor, rej)
	s.qRejections = statement("rejections", s.dialect, floor, rej)
	s.qRejectionsAfter = statement("rejections_after", s.dialect, floor, rej)
	// fence-proxy's reads of every floor (floors.go), Go's alone.
	s.qFloorsAfter, s.qRejectionTotal = floorsQueries(s.dialect, floor)
	if s.dialect == Postgres {
		s.qFloorsAfter = rebind(s.qFloorsAfter)
	}
}

// Statements returns the text of each statement a Store opened with opts
// sends, by its name in statements.sql (a PostgreSQL statement with $1, $2,
// ...), and the renames of columns an older table may need, by the old
// column's name: for tests that check that another implementation of the
// gate (JavaScript's lease-fence/sql) sends the same bytes.
func Statements(opts Options) (map[string]string, error) {
	if opts.Dialect != SQLite && opts.Dialect != Postgres {
		return nil, argError("options.dialect", "must be sqlfence.SQLite or sqlfence.Postgres")
	}
	if opts.Table == "" {
		opts.Table = "lease_fence"
	}
	if !tableName.MatchString(opts.Table) {
		return nil, argError("options.table", "must be a letter or underscore followed by up to 40 letters, digits or underscores")
	}
	s := &Store{dialect: opts.Dialect}
	s.setStatements(opts)
	out := map[string]string{}
	for name, q := range map[string]string{
		"floor_table": s.qFloorTable, "rejection_table": s.qRejectionTable, "has_column": s.qHasColumn, "upsert": s.qUpsert,
		"share": s.qShare, "raise_lock": s.qRaiseLock, "log_rejection": s.qLogRejection, "floor": s.qFloor,
		"rejections": s.qRejections, "rejections_after": s.qRejectionsAfter, "status": s.qStatus,
	} {
		if q != "" {
			out[name] = q
		}
	}
	for _, c := range renamedColumns {
		out["rename_column "+c[0]] = statement("rename_column", s.dialect, "", opts.Table+"_rejection", "{from}", c[0], "{to}", c[1])
	}
	return out, nil
}
