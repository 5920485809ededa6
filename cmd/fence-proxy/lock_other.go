//go:build !unix && !js && !wasip1

package main

import "os"

// lockFile does nothing where flock is missing: run one fence-proxy per
// state file yourself.
func lockFile(*os.File) error { return nil }
