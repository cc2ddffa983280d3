package redisstore

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// read is the reader goroutine of one subscription connection: it confirms
// subscriptions, dispatches messages and checks the connection's health,
// until the connection breaks or the shard is closed.
func (h *hub) read(sh *shard) {
	defer h.wg.Done()
	ctx := context.Background()
	pinged := false
	for {
		msg, err := sh.ps.ReceiveTimeout(ctx, h.s.cfg.health)
		if err != nil {
			if isTimeout(err) && !pinged {
				pinged = true
				if err := sh.ps.Ping(ctx); err == nil {
					continue
				}
			}
			h.fail(sh, err) // a no-op when the shard was closed on purpose
			return
		}
		pinged = false
		h.handle(sh, msg)
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// handle acts on one thing received on a subscription connection.
func (h *hub) handle(sh *shard, msg any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m := msg.(type) {
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			if cs := sh.chans[m.Channel]; cs != nil {
				cs.confirm()
			}
		case "unsubscribe", "sunsubscribe":
			if n := sh.unsub[m.Channel]; n > 0 {
				if n == 1 {
					delete(sh.unsub, m.Channel)
				} else {
					sh.unsub[m.Channel] = n - 1
				}
				return
			}
			// The server dropped the channel (its slot moved): end its
			// watchers, who poll and watch again.
			if cs := sh.chans[m.Channel]; cs != nil {
				for w := range cs.watchers {
					w.end()
				}
				delete(sh.chans, m.Channel)
			}
		}
	case *redis.Message:
		cs := sh.chans[m.Channel]
		if cs == nil {
			return
		}
		ev, ok := parseMessage(m.Payload)
		if !ok {
			h.s.log.Warn("redisstore: unreadable notification ignored", "channel", m.Channel, "payload", m.Payload)
			return
		}
		for w := range cs.watchers {
			w.deliver(h, ev)
		}
	}
}

// message is a notification a script published (see watch.go).
type message struct {
	kind  byte // 'g' grant, 'r' release, 'w' wake after a lapsed hold
	token uint64
	owner string        // of a grant
	head  string        // the waiter whose turn it is, or ""
	next  string        // the waiter after it, or ""
	win   time.Duration // the head's window: when it ends, next is woken
}

// parseMessage reads "g<NUL><token><NUL><owner>" or
// "r|w<NUL><head><NUL><next><NUL><window ms>" (ids contain no NUL).
func parseMessage(p string) (message, bool) {
	f := strings.Split(p, "\x00")
	if len(f[0]) != 1 {
		return message{}, false
	}
	m := message{kind: f[0][0]}
	switch {
	case m.kind == 'g' && len(f) == 3:
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || n == 0 || f[2] == "" {
			return message{}, false
		}
		m.token, m.owner = n, f[2]
	case (m.kind == 'r' || m.kind == 'w') && len(f) == 4:
		n, err := strconv.ParseUint(f[3], 10, 32)
		if err != nil || (m.kind == 'w' && f[1] == "") {
			return message{}, false
		}
		m.head, m.next, m.win = f[1], f[2], time.Duration(n)*time.Millisecond
	default:
		return message{}, false
	}
	return m, true
}
