package zkstore

import (
	"context"
	"time"

	"github.com/go-zookeeper/zk"
)

// Trips returns the number of requests the Store has sent.
func (s *Store) Trips() int64 { return s.trips.Load() }

// LoseCreateReply creates contender's node as a create whose reply was
// lost leaves it: on the server, unknown to the Store but for the doubt.
func (s *Store) LoseCreateReply(ctx context.Context, mutex, contender string, ttl, transition time.Duration) error {
	k := nodeKey{mutex, contender}
	_, err := s.create(ctx, s.dirOf(mutex), k, grant{contender: contender, ttl: ttl, transition: transition}, time.Now())
	s.forget(k, "")
	s.setDoubt(k, true)
	return err
}

// Dir returns the znode of mutex.
func (s *Store) Dir(mutex string) string { return s.dirOf(mutex) }

// Escape and ParseChild expose the name encoding.
var Escape = escape

// ParseChild returns the contender id a node name carries.
func ParseChild(name string) (string, bool) {
	c, ok := parseChild(name)
	return c.contender, ok
}

// Heartbeat returns the send time of the latest heartbeat (or connect
// request) the server answered in the current session.
func (s *Session) Heartbeat() time.Time { return s.tap.state().anchor }

// Nodes returns how many nodes the Store keeps track of.
func (s *Store) Nodes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ks := range s.keys {
		if ks.n != nil {
			n++
		}
	}
	return n
}

// OfflineSession returns a Session whose conn never reaches a server, for
// tests of input checks (New does no I/O).
func OfflineSession() (*Session, error) {
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, err
	}
	return &Session{conn: conn, tap: newTap()}, nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// Subscribed reports whether a Watch subscription of contender for mutex
// is live.
func (s *Store) Subscribed(mutex, contender string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[nodeKey{mutex, contender}]
	return ks != nil && ks.subs > 0
}
