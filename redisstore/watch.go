package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// Push notifications ([lease.Watcher]).
//
// Every writing script publishes on the mutex's channel: "g|<token>|<owner>"
// for a new grant, "r|<head>" for a release (head is the waiter woken, or
// empty) and "w|<head>" when a lapsed hand-off moves on to the next waiter.
// A Watch with a contender hears only its own turn (a release or a lapse
// that names it), so a release wakes one waiter, not the herd; an observer
// (contender "") hears every grant and release.
//
// The Store holds one subscription connection per server it watches (one
// on a single server, one per master on Redis Cluster, with sharded
// pub/sub), multiplexing the channels of every open Watch, and one
// goroutine reading it. The connection is opened by the first Watch; a
// channel stays subscribed, and the connection open, for 100 ms after its
// last Watch ended (a mutex taken in a loop subscribes once), then they
// close; Close ends them at once. A broken connection (killed,
// or silent for longer than a health check) closes every Watch channel it
// carried: package lease then polls and watches again.

// subscribeTimeout bounds how long Watch waits for a new subscription to
// be confirmed, so a partitioned server cannot stall a waiter that would
// otherwise poll.
const subscribeTimeout = 2 * time.Second

// Watch subscribes to the events of mutex for contender, or to every change
// of owner when contender is "". It returns once the server has confirmed
// the subscription (or after a short bound), so a release after Watch
// returns is heard. The channel has a buffer of one, drops events the
// receiver has no room for, and is closed when ctx ends, the subscription
// breaks or the Store closes. Watch does not enqueue the contender.
func (s *Store) Watch(ctx context.Context, mutex, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(mutex); err != nil {
		return nil, fmt.Errorf("redisstore: watch: %w", err)
	}
	if contender != "" {
		if err := lease.ValidateContenderID(contender); err != nil {
			return nil, fmt.Errorf("redisstore: watch %q: %w", mutex, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: watch %q: %w", mutex, err)
	}
	if s.cluster == nil && s.single == nil {
		return nil, fmt.Errorf("redisstore: watch %q: %w: %T", mutex, ErrNoPush, s.c)
	}
	w := &watcher{mutex: mutex, channel: s.channelOf(mutex), contender: contender, ch: make(chan lease.Event, 1)}
	sctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	ready, err := s.hub.add(sctx, w)
	if err != nil {
		return nil, fmt.Errorf("redisstore: watch %q: %w", mutex, err)
	}
	context.AfterFunc(ctx, func() { s.hub.remove(w) })
	select {
	case <-ready:
	case <-sctx.Done():
		if ctx.Err() != nil { // the caller gave up: the AfterFunc removes w
			return nil, fmt.Errorf("redisstore: watch %q: %w", mutex, ctx.Err())
		}
		// Not confirmed in time: keep the subscription; the health check
		// closes the channel if the connection is dead.
	}
	return w.ch, nil
}

// watcher is one Watch subscription.
type watcher struct {
	mutex     string
	channel   string
	contender string // "" for an observer
	ch        chan lease.Event
	sh        *shard // set by hub.add; nil once closed
}

// send delivers ev unless the buffer is full.
func (w *watcher) send(ev lease.Event) {
	select {
	case w.ch <- ev:
	default:
	}
}

// deliver hands the message msg of w's mutex to w, if it concerns w.
func (w *watcher) deliver(m message) {
	switch {
	case w.contender == "" && m.kind != 'w':
		w.send(lease.Event{Mutex: w.mutex, Owner: m.owner, Token: m.token})
	case w.contender != "" && m.kind != 'g' && m.head == w.contender:
		w.send(lease.Event{Mutex: w.mutex})
	}
}
