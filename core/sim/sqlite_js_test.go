//go:build js

package sim

// Under GOOS=js there is no SQLite driver: runs use in-memory gates only.
var testOpenStore func() (StoreGate, error)
