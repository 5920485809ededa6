//go:build js

package sim

import "database/sql"

// Under GOOS=js there is no SQLite driver: runs use in-memory gates only.
var testOpenSQL func() (*sql.DB, error)
