package tck_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// A store whose grants live with their holder's session, as ZooKeeper's
// do, emulated on memstore: the server ends a client's session, and every
// grant the client holds, sessionLimit after it last heard from the
// client. It hears from a client all the time, except while the client is
// cut off (tck.Partition). So a holder is surely granted no more than
// the session's limit, whatever it asked for: the store is a
// lease.GrantLimiter, and tells its holders the smaller of the grant asked
// and the limit; while nothing fails, memstore keeps the grant as asked.
//
// sessionLimit is below the suite's default ttl + transition (1.5 s) by
// more than the safety margin (250 ms) and a renewal's time: a store that
// tells its holders the grant asked lets a waiter in before a cut-off
// holder's deadline. It leaves the safety margin and two slow replies of
// the suite (300 ms each): holders keep their leases on a slow store.
// shortSession does not: the suite must not judge the leases it loses.
const (
	sessionLimit = 900 * time.Millisecond
	shortSession = 800 * time.Millisecond
)

// sessionBackend returns the Open of a harness for the session store with
// sessions of limit; with overstate, its clients report the grant asked
// (the mistake).
func sessionBackend(limit time.Duration, overstate bool) func(t *testing.T) tck.Backend {
	return func(t *testing.T) tck.Backend {
		s := memstore.New()
		shared := newSessionClient(s, limit, overstate) // never cut off
		return tck.Backend{
			Client: func() lease.Store { return shared },
			Partitioned: func() (lease.Store, tck.Partition) {
				c := newSessionClient(s, limit, overstate)
				cut, p := tck.Cuttable(c)
				return cut, &sessionCut{Partition: p, c: c}
			},
		}
	}
}

// sessionClient is one client of the session store, in its session.
type sessionClient struct {
	s         *memstore.Store
	limit     time.Duration
	overstate bool

	mu     sync.Mutex
	grants map[[2]string]uint64 // {lock, contender} -> token, held in this session
	expiry *time.Timer          // the server's countdown while cut off
}

func newSessionClient(s *memstore.Store, limit time.Duration, overstate bool) *sessionClient {
	return &sessionClient{s: s, limit: limit, overstate: overstate, grants: map[[2]string]uint64{}}
}

// MaxGrant implements lease.GrantLimiter.
func (c *sessionClient) MaxGrant() time.Duration { return c.limit }

// granted notes a grant of this session and reports what surely remains.
func (c *sessionClient) granted(name, id string, rec lease.Record, err error) (lease.Record, error) {
	if err != nil || !rec.Held(id) {
		return rec, err
	}
	c.mu.Lock()
	c.grants[[2]string{name, id}] = rec.Token
	c.mu.Unlock()
	if !c.overstate {
		rec.Transition = min(rec.Transition, c.limit)
		rec.TTL = min(rec.TTL, rec.Transition)
	}
	return rec, nil
}

// Acquire implements lease.Store.
func (c *sessionClient) Acquire(ctx context.Context, name, id string, ttl, tr time.Duration) (lease.Record, error) {
	rec, err := c.s.Acquire(ctx, name, id, ttl, tr)
	return c.granted(name, id, rec, err)
}

// Renew implements lease.Store.
func (c *sessionClient) Renew(ctx context.Context, name, id string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
	rec, err := c.s.Renew(ctx, name, id, token, ttl, tr)
	return c.granted(name, id, rec, err)
}

// Release implements lease.Store.
func (c *sessionClient) Release(ctx context.Context, name, id string, token uint64) error {
	err := c.s.Release(ctx, name, id, token)
	if err == nil {
		c.mu.Lock()
		delete(c.grants, [2]string{name, id})
		c.mu.Unlock()
	}
	return err
}

// Get implements lease.Store.
func (c *sessionClient) Get(ctx context.Context, name string) (lease.Record, error) {
	return c.s.Get(ctx, name)
}

// Watch implements lease.Watcher.
func (c *sessionClient) Watch(ctx context.Context, name, id string) (<-chan lease.Event, error) {
	return c.s.Watch(ctx, name, id)
}

// expire ends the session: the server ends every grant of the client.
func (c *sessionClient) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, token := range c.grants {
		c.s.Release(context.Background(), k[0], k[1], token) // ErrNotHeld: it ended already
	}
	clear(c.grants)
}

// sessionCut cuts a client off: the server starts counting down its
// session, and stops when the client is heard from again in time.
type sessionCut struct {
	tck.Partition
	c *sessionClient
}

// Cut implements tck.Partition.
func (p *sessionCut) Cut() {
	p.Partition.Cut()
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if p.c.expiry == nil {
		p.c.expiry = time.AfterFunc(p.c.limit, p.c.expire)
	}
}

// Heal implements tck.Partition.
func (p *sessionCut) Heal() {
	p.c.mu.Lock()
	if p.c.expiry != nil {
		p.c.expiry.Stop()
		p.c.expiry = nil
	}
	p.c.mu.Unlock()
	p.Partition.Heal()
}

// TestSessionStore runs the suite, in a synctest bubble, against the
// session store, which tells its holders less than they asked for: a
// lease.GrantLimiter may (lease/store.go).
func TestSessionStore(t *testing.T) {
	tck.Run(t, tck.Harness{Open: sessionBackend(sessionLimit, false), Synctest: true, Fair: true})
}

// TestShortSessions runs the suite against the session store with
// sessions too short for the slow replies of the slow cases: a holder
// told 800 ms (550 ms after the safety margin) loses its lease when
// every reply takes 300 ms, and the suite does not judge that loss.
func TestShortSessions(t *testing.T) {
	tck.Run(t, tck.Harness{Open: sessionBackend(shortSession, false), Synctest: true, Fair: true})
}
