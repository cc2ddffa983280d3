package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// link is one client connection and, once the proxy forwards, its
// connection to the target.
type link struct {
	p      *Proxy
	client *net.TCPConn

	mu       sync.Mutex
	upstream *net.TCPConn
	dead     bool
	done     chan struct{} // closed by kill
}

// serve connects the link to the target when the proxy lets it, pumps
// bytes both ways, and closes both sockets at the end.
func (l *link) serve() {
	defer l.p.wg.Done()
	defer l.p.forget(l)
	defer l.kill(false)
	if !l.waitForward() {
		return
	}
	ctx, cancel := context.WithTimeout(l.p.ctx, dialTimeout)
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", l.p.Target())
	cancel()
	if err != nil {
		l.kill(true) // the client sees a reset, as with a refused connection
		return
	}
	if !l.attach(up.(*net.TCPConn)) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pump(l.client, l.upstream, false) }()
	go func() { defer wg.Done(); l.pump(l.upstream, l.client, true) }()
	wg.Wait()
}

// waitForward waits until the proxy neither cuts nor black-holes; false
// when the link must end instead.
func (l *link) waitForward() bool {
	for {
		m, _, changed, closed := l.p.state()
		switch {
		case closed:
			return false
		case m == cut:
			l.kill(true)
			return false
		case m == forward, m == deaf:
			return true
		}
		select {
		case <-changed:
		case <-l.done:
			return false
		}
	}
}

// attach records the connection to the target; false (and up closed) when
// the link was killed meanwhile.
func (l *link) attach(up *net.TCPConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		_ = up.Close()
		return false
	}
	l.upstream = up
	return true
}

// pump copies src to dst chunk by chunk, through the fault gate. The end of
// src passes the gate too (a black hole swallows FINs and resets as well):
// at EOF it half-closes dst, so the other direction may still finish; on
// any other error it kills the link. reply says that src is the server.
func (l *link) pump(src, dst *net.TCPConn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		readAt := time.Now()
		if n > 0 {
			if !l.gate(readAt, reply) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.kill(false)
				return
			}
		}
		if err == nil {
			continue
		}
		if !l.gate(readAt, reply) {
			return
		}
		if errors.Is(err, io.EOF) {
			_ = dst.CloseWrite()
		} else {
			l.kill(false)
		}
		return
	}
}

// gate holds a chunk read at readAt until it may be forwarded: not while
// black-holed, not before readAt plus the delay; a reply while replies are
// dropped kills the link. False when the link ends.
func (l *link) gate(readAt time.Time, reply bool) bool {
	for {
		m, d, changed, closed := l.p.state()
		if closed || m == cut {
			return false
		}
		if m == deaf && reply {
			l.kill(true)
			return false
		}
		if m == forward || m == deaf {
			wait := time.Until(readAt.Add(d))
			if wait <= 0 {
				return true
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-changed:
				t.Stop()
			case <-l.done:
				t.Stop()
				return false
			}
			continue // re-check: the fault may have changed meanwhile
		}
		select { // black hole: hold the chunk
		case <-changed:
		case <-l.done:
			return false
		}
	}
}

// kill closes both sockets (with a reset when rst) and wakes the link's
// waiters. Later calls do nothing.
func (l *link) kill(rst bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		return
	}
	l.dead = true
	close(l.done)
	for _, c := range []*net.TCPConn{l.client, l.upstream} {
		if c == nil {
			continue
		}
		if rst {
			_ = c.SetLinger(0) // close sends RST instead of FIN
		}
		_ = c.Close()
	}
}
