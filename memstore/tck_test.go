package memstore_test

import (
	"testing"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// TestTCK runs the conformance suite against memstore. Every case runs in
// its own synctest bubble with one Store shared by all of its clients, so
// the suite's minutes of protocol time take a moment.
func TestTCK(t *testing.T) {
	tck.Run(t, tck.Harness{
		Open: func(t *testing.T) tck.Backend {
			s := memstore.New()
			return tck.Backend{
				Client:      func() lease.Store { return s },
				Partitioned: func() (lease.Store, tck.Partition) { return tck.Cuttable(s) },
			}
		},
		Synctest: true,
		Fair:     true,
	})
}
