//go:build linux && !drill

package main

// pgDrill selects the long forms of the PostgreSQL drills (make drill-pg,
// which builds with the drill tag).
const pgDrill = false
