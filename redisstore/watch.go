package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// Push notifications ([lease.Watcher]).
//
// Scripts publish on the lock's channel, fields separated by NUL:
// "g <token> <owner>" for a new grant (only when someone waits or
// observes), "r <head> <next> <window>" for a release (head is the waiter
// whose turn it is, or empty; next the one after it) and
// "w <head> <next> <window>" when a lapsed hold moves on to the next
// waiter. A Watch with a contender hears only its own turn: head wakes at
// once; next wakes when head's window ends, unless a grant is heard first,
// so a waiter that crashed at the head of the queue delays the next one by
// one window, not until the old owner's transition end. A release thus
// wakes one waiter, or two when the first does not come. An observer
// (contender "") hears every grant and release; its Watch flags the lock
// so that grants and releases publish.
//
// The Store holds one subscription connection per server it watches (one
// on a single server, one per master on Redis Cluster, with sharded
// pub/sub), multiplexing the channels of every open Watch, and one
// goroutine reading it. The connection is opened by the first Watch; a
// channel stays subscribed, and the connection open, for 100 ms after its
// last Watch ended (a lock taken in a loop subscribes once), then they
// close; Close ends them at once. A broken connection (killed,
// or silent for longer than a health check) closes every Watch channel it
// carried: package lease then polls and watches again.

// nextGrace is how long the waiter after the head waits for the head's
// grant before it tries itself, when the release reserved nothing
// (WithHandoff(0)); nextMargin is added to a window, so that the next
// waiter comes when the head's reservation has lapsed on the server's
// clock.
const (
	nextGrace  = 100 * time.Millisecond
	nextMargin = 5 * time.Millisecond
)

// subscribeTimeout bounds how long Watch waits for a new subscription to
// be confirmed, so a partitioned server cannot stall a waiter that would
// otherwise poll.
const subscribeTimeout = 2 * time.Second

// Watch subscribes to the events of lock for contender (its turn after a
// release, see above), or to every change of owner when contender is ""
// (then it also flags the lock, so that grants and releases publish). It
// returns once the server has confirmed the subscription (or after a short
// bound), so a release after Watch returns is heard. The channel has a
// buffer of one, drops events the receiver has no room for, and is closed
// when ctx ends, the subscription breaks or the Store closes. Watch does
// not enqueue the contender.
func (s *Store) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, fmt.Errorf("redisstore: watch: %w", err)
	}
	if contender != "" {
		if err := lease.ValidateContenderID(contender); err != nil {
			return nil, fmt.Errorf("redisstore: watch %q: %w", name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: watch %q: %w", name, err)
	}
	if s.cluster == nil && s.single == nil {
		return nil, fmt.Errorf("redisstore: watch %q: %w: %T", name, ErrNoPush, s.c)
	}
	w := &watcher{mutex: name, channel: s.channelOf(name), contender: contender, ch: make(chan lease.Event, 1)}
	sctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	ready, err := s.hub.add(sctx, w)
	if err != nil {
		return nil, fmt.Errorf("redisstore: watch %q: %w", name, err)
	}
	context.AfterFunc(ctx, func() { s.hub.remove(w) })
	select {
	case <-ready:
	case <-sctx.Done():
		if ctx.Err() != nil { // the caller gave up: the AfterFunc removes w
			return nil, fmt.Errorf("redisstore: watch %q: %w", name, ctx.Err())
		}
		// Not confirmed in time: keep the subscription; the health check
		// closes the channel if the connection is dead.
	}
	if contender == "" {
		// Best effort: without the flag the observer still polls.
		a := []any{"evalsha", observeScript.sha, 1, s.recordKey(name), ms(s.cfg.keep)}
		if _, err := s.run(sctx, &observeScript, a); err != nil {
			s.log.Warn("redisstore: observer not registered; it polls", "lock", name, "error", err)
		}
	}
	return w.ch, nil
}

// watcher is one Watch subscription. Its fields after ch are guarded by
// the hub's mu.
type watcher struct {
	mutex     string
	channel   string
	contender string // "" for an observer
	ch        chan lease.Event
	sh        *shard      // set by hub.add; nil once closed
	timer     *time.Timer // wakes w when the head's window ends, or nil
}

// send delivers ev unless the buffer is full.
func (w *watcher) send(ev lease.Event) {
	select {
	case w.ch <- ev:
	default:
	}
}

// deliver hands the message m of w's lock to w, if it concerns w.
func (w *watcher) deliver(h *hub, m message) {
	switch {
	case w.contender == "":
		if m.kind != 'w' {
			tokenFloor.raise(m.token, nil)
			w.send(lease.Event{Name: w.mutex, OwnerID: m.owner, Token: m.token})
		}
	case m.kind == 'g':
		w.disarm()
	case m.head == w.contender:
		w.disarm()
		w.send(lease.Event{Name: w.mutex})
	case m.next == w.contender:
		w.disarm()
		d := m.win + nextMargin // the reservation has surely lapsed by then
		if m.win == 0 {
			d = nextGrace
		}
		var t *time.Timer
		t = time.AfterFunc(d, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if w.timer == t && w.sh != nil {
				w.timer = nil
				w.send(lease.Event{Name: w.mutex})
			}
		})
		w.timer = t
	}
}

func (w *watcher) disarm() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// end closes w's channel; the hub's mu is held.
func (w *watcher) end() {
	w.disarm()
	w.sh = nil
	close(w.ch)
}
