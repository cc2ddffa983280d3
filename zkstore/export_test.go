package zkstore

import (
	"context"
	"time"
)

// Trips returns the number of requests the Store has sent.
func (s *Store) Trips() int64 { return s.trips.Load() }

// LoseCreateReply creates contender's node as a create whose reply was
// lost leaves it: on the server, unknown to the Store but for the doubt.
func (s *Store) LoseCreateReply(ctx context.Context, mutex, contender string, ttl, transition time.Duration) error {
	k := nodeKey{mutex, contender}
	_, err := s.create(ctx, s.dirOf(mutex), k, grant{contender: contender, ttl: ttl, transition: transition})
	s.forget(k)
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
