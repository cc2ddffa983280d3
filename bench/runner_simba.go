package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// The lease settings of every simba target: a grant lives ttl + transition
// = 8 s on the server, as long as redsync's default expiry.
const (
	simbaTTL        = 5 * time.Second
	simbaTransition = 3 * time.Second
)

// simbaSettings states simbaTTL and simbaTransition for Target.Settings.
var simbaSettings = fmt.Sprintf("ttl %v + transition %v (a grant lives %v), renewed every ttl/3, push wake-ups",
	simbaTTL, simbaTransition, simbaTTL+simbaTransition)

var contenders atomic.Int64

// contenderID returns an id no other client of this run (or of a holder
// process) uses.
func contenderID() string {
	return fmt.Sprintf("bench-%d-%d", os.Getpid(), contenders.Add(1))
}

// simbaClient is a Client over one lease.Manager with a contender id of its
// own; the adapters of every backend share it. closers run after the
// Manager is closed, in order (the store, then its connections).
type simbaClient struct {
	m       *lease.Manager
	closers []func() error
}

// newSimbaClient returns a Client on store with simbaTTL and
// simbaTransition. On error it runs closers.
func newSimbaClient(store lease.Store, closers ...func() error) (Client, error) {
	m, err := lease.NewManager(store, lease.WithTTL(simbaTTL), lease.WithTransition(simbaTransition),
		lease.WithContenderID(contenderID()))
	if err != nil {
		return nil, errors.Join(err, runClosers(closers))
	}
	return &simbaClient{m: m, closers: closers}, nil
}

// Lock implements Client.
func (c *simbaClient) Lock(ctx context.Context, key string) (Lock, error) {
	l, err := c.m.Acquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return simbaLock{l}, nil
}

// Close implements Client: it closes the Manager (which releases what it
// still holds), then the store and the connections.
func (c *simbaClient) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(c.m.Close(ctx), runClosers(c.closers))
}

type simbaLock struct{ l *lease.Lease }

// Unlock implements Lock.
func (l simbaLock) Unlock(ctx context.Context) error { return l.l.Release(ctx) }

func runClosers(closers []func() error) error {
	var err error
	for _, c := range closers {
		err = errors.Join(err, c())
	}
	return err
}
