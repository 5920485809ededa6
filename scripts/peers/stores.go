package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"
)

// The storage engines the coordinator could keep its state in, compared on
// the one thing it asks of them: a synced write of one entry (about 230
// bytes, the size of a stored lease) per cycle, each client on its own key.
//
//	store-pebble       Pebble v2 (CockroachDB's engine): one batch with
//	                   pebble.Sync per write; concurrent batches share the
//	                   write-ahead log's fdatasync.
//	store-bbolt        bbolt (etcd's store): one Update per write (two
//	                   fdatasyncs: the pages, then the meta page).
//	store-bbolt-batch  bbolt's db.Batch, which groups concurrent Updates
//	                   into one transaction (waiting up to MaxBatchDelay,
//	                   set to 200us, for more).
func startStore(target string) (func(int) (func(context.Context, string) error, func(), error), func(), error) {
	dir, err := os.MkdirTemp("", "peers-store-")
	if err != nil {
		return nil, nil, err
	}
	value := []byte(`{"holderId":"holder-0000","requestId":"0123456789abcdef0123456789abcdef","fence":123456,"expiresAt":1796000000000.125,"secretSha256":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`)
	var write func(key string) error
	var closeDB func() error
	switch target {
	case "store-pebble":
		db, err := pebble.Open(filepath.Join(dir, "pebble"), &pebble.Options{Logger: quiet{}, FormatMajorVersion: pebble.FormatNewest})
		if err != nil {
			return nil, nil, err
		}
		write = func(key string) error { return db.Set([]byte("lease/"+key), value, pebble.Sync) }
		closeDB = db.Close
	default:
		db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
		if err != nil {
			return nil, nil, err
		}
		db.MaxBatchDelay = 200_000 // ns
		if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("leases")); return err }); err != nil {
			return nil, nil, err
		}
		update := db.Update
		if target == "store-bbolt-batch" {
			update = db.Batch
		}
		write = func(key string) error {
			return update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("leases")).Put([]byte(key), value) })
		}
		closeDB = db.Close
	}
	mk := func(int) (func(context.Context, string) error, func(), error) {
		n := 0
		return func(_ context.Context, key string) error {
			n++
			return write(key + "-" + strconv.Itoa(n%64))
		}, func() {}, nil
	}
	return mk, func() { _ = closeDB(); os.RemoveAll(dir) }, nil
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(f string, a ...any) {
	panic("pebble: " + f)
}
