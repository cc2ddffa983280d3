package zkstore

import (
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// hostProvider is go-zookeeper's DNS host provider, but for when it asks
// go-zookeeper to pause for a second before dialing again: only after
// every server failed in a row (refused, timed out, or closed before
// answering the connect request). go-zookeeper's own pauses on every
// reconnect to a single server, so a client whose session expired during
// a partition would wait a second more for a new one once healed.
type hostProvider struct {
	inner *zk.DNSHostProvider

	mu     sync.Mutex
	failed int // connections in a row that reached no server
}

// Init implements zk.HostProvider.
func (h *hostProvider) Init(servers []string) error { return h.inner.Init(servers) }

// Len implements zk.HostProvider.
func (h *hostProvider) Len() int { return h.inner.Len() }

// Next implements zk.HostProvider.
func (h *hostProvider) Next() (string, bool) {
	server, _ := h.inner.Next()
	h.mu.Lock()
	defer h.mu.Unlock()
	retryStart := h.failed >= h.inner.Len()
	if retryStart {
		h.failed = 0
	}
	return server, retryStart
}

// Connected implements zk.HostProvider.
func (h *hostProvider) Connected() { h.inner.Connected() }

// result records how a connection ended: reached means a server answered
// its connect request.
func (h *hostProvider) result(reached bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if reached {
		h.failed = 0
	} else {
		h.failed++
	}
}

// dialer returns the zk.Dialer of a Session: d's connections, each seen
// by the tap and reported to hp.
func dialer(d zk.Dialer, t *tap, hp *hostProvider) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := d(network, addr, timeout)
		if err != nil {
			hp.result(false)
			return nil, err
		}
		tc := newTapConn(c, t)
		tc.onClose = func(reached bool) { hp.result(reached) }
		return tc, nil
	}
}

// Close implements net.Conn.
func (c *tapConn) Close() error {
	c.closeOnce.Do(func() {
		c.pmu.Lock()
		reached := c.reached
		c.pmu.Unlock()
		if c.onClose != nil {
			c.onClose(reached)
		}
	})
	return c.Conn.Close()
}
