package tck_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// A store's own test runs the whole suite with tck.Run. This is how
// memstore runs it; a store with a server opens a new client, with its own
// connection, on every Client call, and a proxy it can black-hole for
// Partitioned. The example only compiles: the suite needs the *testing.T
// of a test.
func Example() {
	testTCK := func(t *testing.T) { // func TestTCK(t *testing.T) in the store's package
		tck.Run(t, tck.Harness{
			Open: func(t *testing.T) tck.Backend {
				s := memstore.New()
				return tck.Backend{
					Client:      func() lease.Store { return s },
					Partitioned: func() (lease.Store, tck.Partition) { return tck.Cuttable(s) },
				}
			},
			TTL:        time.Second,
			Transition: 500 * time.Millisecond,
			Synctest:   true, // only for an in-process store
			Fair:       true, // only if the store serves the longest waiter first
		})
	}
	_ = testTCK
}
