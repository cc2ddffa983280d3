package tck

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
)

// A tap is a client of the store under test that the suite instruments.
// It forwards every call to the client it wraps and can
//
//   - log each call: what it asked, when it was sent, when its reply
//     reached the caller, and the reply;
//   - delay every reply (the store applies the call at once, the answer
//     comes late);
//   - cut the client off, as a black-holing network does: a call that has
//     not reached the store waits before it, a reply waits before the
//     caller, until Heal. A hung call either ignores its context (as a
//     client that does not watch it) or returns when its context ends;
//   - cut itself, together with the backend's own Partition, at an exact
//     point of the protocol that a trigger names (the sending of a
//     renewal, the reply that confirmed one);
//   - run hooks when a call is sent and before a reply reaches the caller,
//     so a case can check what holds at that instant.
//
// A tap is a Partition. Its client has exactly the optional capabilities
// ([lease.Watcher], [lease.BatchRenewer]) of the wrapped one.
type tap struct {
	s       lease.Store
	logging bool

	mu      sync.Mutex
	cut     chan struct{}                    // non-nil while cut; closed by Heal
	cutOnce chan struct{}                    // closed at the first Cut
	cutAt   time.Time                        // when the first Cut came
	honour  bool                             // a hung call returns when its context ends
	delay   time.Duration                    // added to every reply
	delays  map[string]time.Duration         // added to the replies of one operation
	part    Partition                        // cut and healed with the tap; may be nil
	trigger func(c *call, replied bool) bool // asked until the first Cut, under mu
	onSend  func(c *call)
	onReply func(c *call)
	log     []call
}

// The operations a call log names.
const (
	opAcquire = "Acquire"
	opRenew   = "Renew" // also each request of a RenewMany
	opRelease = "Release"
	opGet     = "Get"
)

// call is one store call seen by a tap.
type call struct {
	op               string
	mutex, contender string
	token            uint64 // Renew and Release
	sent             time.Time
	returned         time.Time // when the reply reached the caller; zero if it never did
	rec              lease.Record
	err              error
	mark             bool // set by an onSend hook
}

func newTap(s lease.Store) *tap {
	return &tap{s: s, logging: true, cutOnce: make(chan struct{})}
}

// wrapped returns the client the tap wraps.
func (t *tap) wrapped() lease.Store { return t.s }

// Cut implements Partition: later calls hang, replies are withheld.
func (t *tap) Cut() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cutLocked()
}

func (t *tap) cutLocked() {
	if t.cut != nil {
		return
	}
	t.cut = make(chan struct{})
	select {
	case <-t.cutOnce:
	default:
		t.cutAt = time.Now()
		close(t.cutOnce)
	}
	if t.part != nil {
		t.part.Cut()
	}
}

// Heal implements Partition: hung calls go on.
func (t *tap) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut != nil {
		close(t.cut)
		t.cut = nil
	}
	if t.part != nil {
		t.part.Heal()
	}
}

func (t *tap) isCut() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut != nil
}

// firstCut waits up to d for the tap's first Cut and returns its time.
func (e *env) firstCut(t *tap, d time.Duration, what string) time.Time {
	e.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.cutOnce:
	case <-timer.C:
		e.t.Fatalf("%s: not within %v", what, d)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cutAt
}

// armed reports whether the trigger is still to be asked: the tap cuts
// itself at most once, so a healed client stays healed. t.mu is held.
func (t *tap) armed() bool {
	if t.trigger == nil {
		return false
	}
	select {
	case <-t.cutOnce:
		return false
	default:
		return true
	}
}

// set changes the tap's behaviour under its lock.
func (t *tap) set(f func(t *tap)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

// pass waits while the tap is cut: until Heal, or until ctx ends when the
// tap honours contexts.
func (t *tap) pass(ctx context.Context) error {
	t.mu.Lock()
	c, honour := t.cut, t.honour
	t.mu.Unlock()
	if c == nil {
		return nil
	}
	if !honour {
		<-c
		return nil
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tck: call cut off: %w", ctx.Err())
	}
}

// wait sleeps for the reply delay of op (cut short by ctx when honouring
// it).
func (t *tap) wait(ctx context.Context, op string) error {
	t.mu.Lock()
	d, honour := t.delay+t.delays[op], t.honour
	t.mu.Unlock()
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	if !honour {
		<-timer.C
		return nil
	}
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tck: slow reply: %w", ctx.Err())
	}
}

// do runs one call through the tap: the send hook and trigger, the cut,
// the store, the delay, the cut again, the reply trigger and hook, the log.
func (t *tap) do(ctx context.Context, c call, f func(ctx context.Context) (lease.Record, error)) (lease.Record, error) {
	c.sent = time.Now()
	t.sending(&c)
	if err := t.pass(ctx); err != nil {
		return lease.Record{}, t.done(c, lease.Record{}, err, false)
	}
	rec, err := t.run(ctx, f)
	if werr := t.wait(ctx, c.op); werr != nil {
		return lease.Record{}, t.done(c, lease.Record{}, werr, false)
	}
	if perr := t.pass(ctx); perr != nil {
		return lease.Record{}, t.done(c, lease.Record{}, perr, false)
	}
	return rec, t.done(c, rec, err, true)
}

// run calls f; a tap that honours contexts returns when ctx ends even if
// the wrapped client does not (its call then finishes in the background).
func (t *tap) run(ctx context.Context, f func(ctx context.Context) (lease.Record, error)) (lease.Record, error) {
	t.mu.Lock()
	honour := t.honour
	t.mu.Unlock()
	if !honour {
		return f(ctx)
	}
	type result struct {
		rec lease.Record
		err error
	}
	ch := make(chan result, 1)
	go func() {
		rec, err := f(ctx)
		ch <- result{rec, err}
	}()
	select {
	case r := <-ch:
		return r.rec, r.err
	case <-ctx.Done():
		return lease.Record{}, fmt.Errorf("tck: call cut off: %w", ctx.Err())
	}
}

func (t *tap) sending(c *call) {
	t.mu.Lock()
	hook := t.onSend
	if t.armed() && t.trigger(c, false) {
		t.cutLocked()
	}
	t.mu.Unlock()
	if hook != nil {
		hook(c)
	}
}

// done finishes a call that returns rec and err to its caller (replied:
// the store's answer, not a cut-off or a context's end) and returns err.
func (t *tap) done(c call, rec lease.Record, err error, replied bool) error {
	c.rec, c.err = rec, err
	t.mu.Lock()
	if replied && t.armed() && t.trigger(&c, true) {
		t.cutLocked()
	}
	hook := t.onReply
	t.mu.Unlock()
	if hook != nil {
		hook(&c)
	}
	c.returned = time.Now()
	t.mu.Lock()
	if t.logging {
		t.log = append(t.log, c)
	}
	t.mu.Unlock()
	return err
}

// calls returns the logged calls for which match is true.
func (t *tap) calls(match func(c call) bool) []call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []call
	for _, c := range t.log {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// newestSent returns when the newest call on lock that succeeded was
// sent (zero if none): a lease's deadline can only count from a call that
// confirmed its grant, and such a call has returned before the lease knows
// of it.
func (t *tap) newestSent(name string) time.Time {
	var newest time.Time
	for _, c := range t.calls(func(c call) bool { return c.mutex == name && c.err == nil }) {
		if c.sent.After(newest) {
			newest = c.sent
		}
	}
	return newest
}

// newestConfirmed returns the newest call (by its sending) that confirmed
// the grant with token on lock, an Acquire or Renew that returned it,
// among those whose reply came before by.
func (t *tap) newestConfirmed(name string, token uint64, by time.Time) (newest call, ok bool) {
	for _, c := range t.calls(func(c call) bool {
		return c.mutex == name && (c.op == opAcquire || c.op == opRenew) && c.err == nil &&
			c.rec.Held(c.contender) && c.rec.Token == token && !c.returned.IsZero() && c.returned.Before(by)
	}) {
		if !ok || c.sent.After(newest.sent) {
			newest, ok = c, true
		}
	}
	return newest, ok
}

// grantSent returns when the first Acquire that returned the grant with
// token to contender was sent, and whether lease was live then (the mark
// its onSend hook set).
func (t *tap) grantSent(contender string, token uint64) (sent time.Time, mark, ok bool) {
	for _, c := range t.calls(func(c call) bool {
		return c.op == opAcquire && c.err == nil && c.rec.Held(contender) && c.rec.Token == token
	}) {
		if !ok || c.sent.Before(sent) {
			sent, mark, ok = c.sent, c.mark, true
		}
	}
	return sent, mark, ok
}
