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
	io sync.Mutex // serializes subscribe, unsubscribe and close, so the wire order follows the state
	mu sync.Mutex // guards the fields below and every shard's maps
	wg sync.WaitGroup

	shards map[string]*shard // by node address; "" on a single server
	closed bool
}

// shard is one subscription connection.
type shard struct {
	addr  string
	ps    *redis.PubSub
	chans map[string]*chanState
	unsub map[string]int // our unsubscribes the server has not confirmed yet
	dead  bool
}

// chanState is one subscribed channel.
type chanState struct {
	watchers map[*watcher]struct{}
	ready    chan struct{} // closed when the server confirms the subscription
	readyOK  bool
}

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
	w.sh = sh
	h.mu.Unlock()
	if subscribe {
		if err := h.s.subscribe(ctx, sh.ps, w.channel); err != nil {
			h.drop(w) // a fresh shard has no other channel, so it closes too
			return nil, err
		}
	}
	if fresh {
		h.wg.Add(1)
		go h.read(sh)
	}
	return cs.ready, nil
}

// remove ends w when its context ends.
func (h *hub) remove(w *watcher) {
	h.io.Lock()
	defer h.io.Unlock()
	h.drop(w)
}

// drop ends w and unsubscribes from its channel when nobody else watches
// it; the last channel of a shard closes the shard. h.io is held.
func (h *hub) drop(w *watcher) {
	h.mu.Lock()
	sh := w.sh
	if sh == nil { // already ended by a broken subscription or Close
		h.mu.Unlock()
		return
	}
	w.sh = nil
	close(w.ch)
	cs := sh.chans[w.channel]
	delete(cs.watchers, w)
	unsub, closeShard := false, false
	if len(cs.watchers) == 0 {
		delete(sh.chans, w.channel)
		if len(sh.chans) == 0 {
			delete(h.shards, sh.addr)
			sh.dead, closeShard = true, true
		} else {
			sh.unsub[w.channel]++
			unsub = true
		}
	}
	h.mu.Unlock()
	switch {
	case closeShard:
		_ = sh.ps.Close()
	case unsub:
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		defer cancel()
		if err := h.s.unsubscribe(ctx, sh.ps, w.channel); err != nil {
			h.fail(sh, err) // the connection is in doubt: start afresh
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
			w.sh = nil
			close(w.ch)
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

func (s *Store) unsubscribe(ctx context.Context, ps *redis.PubSub, channel string) error {
	if s.cluster != nil {
		return ps.SUnsubscribe(ctx, channel)
	}
	return ps.Unsubscribe(ctx, channel)
}

// healthCheck is how long a subscription connection may stay silent
// before the reader pings it; a ping unanswered for as long again breaks
// the subscription.
const healthCheck = 10 * time.Second
