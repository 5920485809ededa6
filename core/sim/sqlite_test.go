//go:build !js

package sim

import (
	"database/sql"

	_ "modernc.org/sqlite"
)

// testOpenSQL opens a fresh SQLite database in memory (one connection, so
// it stays one database) for the runs that write through sqlfence.
var testOpenSQL = func() (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
