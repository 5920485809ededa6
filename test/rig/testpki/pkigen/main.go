// Command pkigen makes a private CA and its certificates in a directory,
// for the JavaScript tests of TLS (test/svcclient): it prints the paths
// as one JSON object ({"ca", "server", "serverKey", "client", "clientKey"}).
//
//	pkigen DIR
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/lease-fence/lease-fence/test/rig/testpki"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pkigen DIR")
		os.Exit(2)
	}
	p, err := testpki.New(os.Args[1], "lease-fence-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkigen:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"ca": p.CA, "server": p.Server, "serverKey": p.ServerKey,
		"client": p.Client, "clientKey": p.ClientKey})
}
