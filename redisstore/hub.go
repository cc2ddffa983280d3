package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub holds the Store's subscriptions: one shard (a PubSub connection and
// its reader goroutine) per server watched.
type hub struct {
	s  *Store
	io sync.Mutex // serializes subscribe, unsubscribe and close, so the wire order follows the state (taken before mu)
	mu sync.Mutex // guards the fields below and every shard's maps
	wg sync.WaitGroup

	shards map[string]*shard // by node address; "" on a single server
	closed bool
	sweep  *time.Timer // pending sweep of idle channels, or nil
}

// shard is one subscription connection.
type shard struct {
	addr  string
	ps    *redis.PubSub
	chans map[string]*chanState
	unsub map[string]int // our unsubscribes the server has not confirmed yet
	dead  bool
}

// chanState is one subscribed channel. A channel nobody watches any more
// stays subscribed for idleLinger, so a lock acquired and released in a
// loop does not pay for a subscription each time.
type chanState struct {
	watchers  map[*watcher]struct{}
	ready     chan struct{} // closed when the server confirms the subscription
	readyOK   bool
	idleSince time.Time // when the last watcher left; zero while watched
}

// idleLinger is how long a channel stays subscribed after its last Watch
// ended, and a connection open after its last channel.
const idleLinger = 100 * time.Millisecond

func (c *chanState) confirm() {
	if !c.readyOK {
		c.readyOK = true
		close(c.ready)
	}
}

func newHub(s *Store) *hub { return &hub{s: s, shards: map[string]*shard{}} }

// add registers w and subscribes to its channel when it is new. It returns
// a channel closed when the subscription is confirmed.
func (h *hub) add(ctx context.Context, w *watcher) (<-chan struct{}, error) {
	addr, err := h.s.nodeOf(ctx, w.channel)
	if err != nil {
		return nil, err
	}
	h.io.Lock()
	defer h.io.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	sh := h.shards[addr]
	fresh := sh == nil
	if fresh {
		sh = &shard{addr: addr, ps: h.s.newPubSub(ctx), chans: map[string]*chanState{}, unsub: map[string]int{}}
		h.shards[addr] = sh
	}
	cs := sh.chans[w.channel]
	subscribe := cs == nil
	if subscribe {
		cs = &chanState{watchers: map[*watcher]struct{}{}, ready: make(chan struct{})}
		sh.chans[w.channel] = cs
	}
	cs.watchers[w] = struct{}{}
	cs.idleSince = time.Time{}
	w.sh = sh
	h.mu.Unlock()
	if subscribe {
		if err := h.s.subscribe(ctx, sh.ps, w.channel); err != nil {
			h.fail(sh, err) // the connection is in doubt: start afresh
			return nil, err
		}
	}
	if fresh {
		h.wg.Add(1)
		go h.read(sh)
	}
	return cs.ready, nil
}

// remove ends w when its context ends. A channel left without watchers
// is unsubscribed by a sweep after idleLinger.
func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sh := w.sh
	if sh == nil { // already ended by a broken subscription or Close
		return
	}
	w.end()
	cs := sh.chans[w.channel]
	delete(cs.watchers, w)
	if len(cs.watchers) == 0 {
		cs.idleSince = time.Now()
		if h.sweep == nil && !h.closed {
			h.sweep = time.AfterFunc(idleLinger, h.sweepIdle)
		}
	}
}

// sweepIdle unsubscribes from channels idle for idleLinger and closes
// connections left without channels, then schedules the next sweep.
func (h *hub) sweepIdle() {
	h.io.Lock()
	defer h.io.Unlock()
	type unsub struct {
		sh       *shard
		channels []string
	}
	var unsubs []unsub
	var closing []*shard
	h.mu.Lock()
	h.sweep = nil
	next := time.Duration(0)
	for _, sh := range h.shards {
		u := unsub{sh: sh}
		for ch, cs := range sh.chans {
			if cs.idleSince.IsZero() {
				continue
			}
			if wait := idleLinger - time.Since(cs.idleSince); wait > 0 {
				if next == 0 || wait < next {
					next = wait
				}
				continue
			}
			delete(sh.chans, ch)
			u.channels = append(u.channels, ch)
		}
		switch {
		case len(sh.chans) == 0:
			delete(h.shards, sh.addr)
			sh.dead = true
			closing = append(closing, sh)
		case len(u.channels) > 0:
			for _, ch := range u.channels {
				sh.unsub[ch]++
			}
			unsubs = append(unsubs, u)
		}
	}
	if next > 0 && !h.closed {
		h.sweep = time.AfterFunc(next, h.sweepIdle)
	}
	h.mu.Unlock()
	for _, sh := range closing {
		_ = sh.ps.Close()
	}
	for _, u := range unsubs {
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		err := h.s.unsubscribe(ctx, u.sh.ps, u.channels...)
		cancel()
		if err != nil {
			h.fail(u.sh, err) // the connection is in doubt: start afresh
		}
	}
}

// fail ends every watcher of a broken shard, which the lease package then
// replaces by polling and a new Watch.
func (h *hub) fail(sh *shard, err error) {
	h.mu.Lock()
	if sh.dead {
		h.mu.Unlock()
		return
	}
	h.kill(sh)
	h.mu.Unlock()
	h.s.log.Warn("redisstore: subscription broken; waiters poll until they watch again",
		"server", sh.addr, "error", err)
	_ = sh.ps.Close()
}

// kill marks sh dead and closes its watchers' channels. h.mu is held.
func (h *hub) kill(sh *shard) {
	sh.dead = true
	if h.shards[sh.addr] == sh {
		delete(h.shards, sh.addr)
	}
	for _, cs := range sh.chans {
		for w := range cs.watchers {
			w.end()
		}
		cs.confirm()
	}
	clear(sh.chans)
}

// close ends every subscription and waits for the readers to stop.
func (h *hub) close() {
	h.io.Lock()
	h.mu.Lock()
	h.closed = true
	if h.sweep != nil {
		h.sweep.Stop()
		h.sweep = nil
	}
	var all []*shard
	for _, sh := range h.shards {
		all = append(all, sh)
		h.kill(sh)
	}
	h.mu.Unlock()
	h.io.Unlock()
	for _, sh := range all {
		_ = sh.ps.Close()
	}
	h.wg.Wait()
}

// nodeOf names the server a channel's subscription goes to: the master of
// its slot on Redis Cluster, "" on a single server.
func (s *Store) nodeOf(ctx context.Context, channel string) (string, error) {
	if s.cluster == nil {
		return "", nil
	}
	c, err := s.cluster.MasterForKey(ctx, channel)
	if err != nil {
		return "", err
	}
	return c.Options().Addr, nil
}

// newPubSub returns a PubSub without a connection yet; the first
// subscription dials the server of its channel.
func (s *Store) newPubSub(ctx context.Context) *redis.PubSub {
	if s.cluster != nil {
		return s.cluster.SSubscribe(ctx)
	}
	return s.single.Subscribe(ctx)
}

func (s *Store) subscribe(ctx context.Context, ps *redis.PubSub, channel string) error {
	if s.cluster != nil {
		return ps.SSubscribe(ctx, channel)
	}
	return ps.Subscribe(ctx, channel)
}

// unsubscribe ends the subscriptions to channels: in one command on a
// single server, one command per channel on Redis Cluster, where a sharded
// command must not span slots.
func (s *Store) unsubscribe(ctx context.Context, ps *redis.PubSub, channels ...string) error {
	if s.cluster == nil {
		return ps.Unsubscribe(ctx, channels...)
	}
	for _, ch := range channels {
		if err := ps.SUnsubscribe(ctx, ch); err != nil {
			return err
		}
	}
	return nil
}

// healthCheck is how long a subscription connection may stay silent
// before the reader pings it; a ping unanswered for as long again breaks
// the subscription.
const healthCheck = 10 * time.Second
