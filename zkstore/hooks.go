package zkstore

import (
	"context"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/testhooks"
)

// The integration module's tests reach these internals through
// internal/testhooks (see there).
func init() {
	testhooks.ZKTrips = func(s any) int64 { return s.(*Store).trips.Load() }
	testhooks.ZKLoseCreateReply = func(ctx context.Context, st any, mutex, contender string, ttl, transition time.Duration) error {
		s := st.(*Store)
		k := nodeKey{mutex, contender}
		dir := s.dirOf(mutex)
		_, err := s.create(ctx, dir, nodePrefix(dir, contender), k, grant{contender: contender, ttl: ttl, transition: transition}, time.Now(), true)
		s.forget(k, "")
		s.setDoubt(k, true)
		return err
	}
	testhooks.ZKDir = func(s any, mutex string) string { return s.(*Store).dirOf(mutex) }
	testhooks.ZKEscape = escape
	testhooks.ZKParseChild = func(name string) (string, bool) {
		c, ok := parseChild(name)
		return c.contender, ok
	}
	testhooks.ZKOfflineSession = func() (any, error) {
		conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			return nil, err
		}
		return &Session{conn: conn, tap: newTap()}, nil
	}
	testhooks.ZKAfterQueueRead = func(st any, f func()) {
		s := st.(*Store)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.afterQueueRead = f
	}
	testhooks.ZKCreateAdopt = func(st any, f func(adopt func())) {
		s := st.(*Store)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.adoptHook = f
	}
	testhooks.ZKHoldWatchdog = func(st any) func() {
		s := st.(*Store)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.dog.held = true
		return func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.dog.held = false
			s.wakeLocked()
		}
	}
	testhooks.ZKHoldRetire = func(st any) func() {
		s := st.(*Store)
		gate := make(chan struct{})
		s.mu.Lock()
		defer s.mu.Unlock()
		s.retireGate = gate
		var once sync.Once
		return func() {
			once.Do(func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.retireGate == gate {
					s.retireGate = nil
				}
				close(gate)
			})
		}
	}
	testhooks.ZKBeforeRequest = func(st any, f func(start func() bool)) {
		s := st.(*Store)
		if f == nil {
			s.beforeRequest.Store(nil)
			return
		}
		s.beforeRequest.Store(&f)
	}
	testhooks.ZKSubscribed = func(st any, mutex, contender string) bool {
		s := st.(*Store)
		s.mu.Lock()
		defer s.mu.Unlock()
		ks := s.keys[nodeKey{mutex, contender}]
		return ks != nil && ks.subs > 0
	}
}

// nopLogger drops the zk library's log lines.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
