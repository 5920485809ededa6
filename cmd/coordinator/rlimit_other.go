//go:build !unix && !js && !wasip1

package main

// fdLimit reports that the file-descriptor limit is unknown here.
func fdLimit() (uint64, bool) { return 0, false }
