package tck

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
)

// A recording leader: the callbacks of one Contender, with their order
// checked.

// acquisition is one OnAcquired call seen by a leader.
type acquisition struct {
	l   *lease.Lease
	ctx context.Context
	at  time.Time // when OnAcquired was called
}

// releaseCall is one OnReleased call seen by a leader.
type releaseCall struct {
	prev lease.Owner
	at   time.Time
}

// leader records the callbacks of one Contender and checks their order:
// OnAcquired, its return, then OnReleased, never overlapping. Its
// OnAcquired blocks until its context is done.
type leader struct {
	acquired chan acquisition
	ended    chan time.Time // when an OnAcquired saw its context done
	released chan releaseCall

	// linger is how long OnAcquired goes on working after its context
	// ended, as a leader that finishes a write would.
	linger time.Duration

	mu    sync.Mutex
	state string // "idle", "in OnAcquired", "leading"
	errs  []string
	owner lease.Owner   // latest OnOwner
	rels  []releaseCall // every OnReleased, also those taken from released
}

// contend starts a Contender for name on m with a recording leader.
func (e *env) contend(m *lease.Manager, name string) (*lease.Contender, *leader) {
	e.t.Helper()
	return e.contendLinger(m, name, 0)
}

// contendLinger is contend with a leader whose OnAcquired returns linger
// after its context ended.
func (e *env) contendLinger(m *lease.Manager, name string, linger time.Duration) (*lease.Contender, *leader) {
	e.t.Helper()
	r := &leader{
		acquired: make(chan acquisition, 64),
		ended:    make(chan time.Time, 64),
		released: make(chan releaseCall, 64),
		state:    "idle",
		linger:   linger,
	}
	c, err := m.Contend(name, lease.Callbacks{
		OnAcquired: r.onAcquired,
		OnReleased: r.onReleased,
		OnOwner:    r.onOwner,
	})
	if err != nil {
		e.t.Fatalf("Contend(%q): %v", name, err)
	}
	return c, r
}

func (r *leader) onAcquired(ctx context.Context, l *lease.Lease) {
	r.transit("idle", "in OnAcquired", "OnAcquired")
	r.acquired <- acquisition{l: l, ctx: ctx, at: time.Now()}
	<-ctx.Done()
	r.ended <- time.Now()
	time.Sleep(r.linger)
	r.transit("in OnAcquired", "leading", "return of OnAcquired")
}

func (r *leader) onReleased(prev lease.Owner) {
	r.transit("leading", "idle", "OnReleased")
	rc := releaseCall{prev: prev, at: time.Now()}
	r.mu.Lock()
	r.rels = append(r.rels, rc)
	r.mu.Unlock()
	r.released <- rc
}

// releases returns the number of OnReleased calls so far.
func (r *leader) releases() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.rels)
}

// lastRelease returns the latest OnReleased call (zero if none).
func (r *leader) lastRelease() releaseCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.rels) == 0 {
		return releaseCall{}
	}
	return r.rels[len(r.rels)-1]
}

func (r *leader) onOwner(o lease.Owner) {
	r.mu.Lock()
	r.owner = o
	r.mu.Unlock()
}

func (r *leader) transit(from, to, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != from {
		r.errs = append(r.errs, fmt.Sprintf("%s while %s (want %s)", what, r.state, from))
	}
	r.state = to
}

// next waits for the next OnAcquired.
func (r *leader) next(e *env, d time.Duration, what string) acquisition {
	e.t.Helper()
	return recv(e, r.acquired, d, what)
}

// lastOwner returns the owner of the latest OnOwner call.
func (r *leader) lastOwner() lease.Owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owner
}

// verify reports every callback that came out of order.
func (r *leader) verify(e *env, who string) {
	e.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, msg := range r.errs {
		e.t.Errorf("callbacks of %s: %s", who, msg)
	}
}
