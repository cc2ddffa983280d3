// Package faultproxy is a TCP proxy for fault tests: put it between a client
// and its server, then cut, black-hole or slow down the connections and heal
// them again, while the client keeps talking to the same address.
//
//	p, err := faultproxy.New(serverAddr) // listens on 127.0.0.1:0
//	defer p.Close()
//	client := connect(p.Addr())
//	p.Blackhole() // requests hang, sockets stay open (a partition)
//	p.Heal()      // held bytes flow again
//
// The faults and what a client sees:
//
//   - [Proxy.Cut]: every open connection is reset (RST) on both sides; while
//     cut, new connections are accepted and reset at once. Cut then Heal drops
//     the current connections once and lets the client reconnect.
//   - [Proxy.Blackhole]: no byte moves in either direction; sockets stay open
//     and nobody is told (a network partition, a half-open connection). New
//     connections are accepted but not connected to the server. On Heal the
//     held bytes are delivered, as TCP would after a short partition.
//   - [Proxy.Delay]: each chunk read from one side is written to the other d
//     after it was read, in order, both directions. Chunks are forwarded one
//     at a time per direction, so a stream of back-to-back chunks is slowed
//     more than d each: the proxy models a slow path for request/response
//     traffic, not a long fat pipe.
//   - [Proxy.DropReplies]: requests still reach the server, but the first
//     bytes the server sends back on a connection reset it instead of being
//     delivered: the server applied the request and its reply was lost.
//
// And to move clients to another server (a failover): [Proxy.SetTarget]
// sends new connections to another address while the open ones stay with
// the old server; [Proxy.Reset] resets the open ones once (the client
// reconnects, to the new target), leaving the fault in force.
//
// Heal ends all faults (mode and delay). A Proxy is safe for concurrent use;
// Close stops it and waits for all of its goroutines.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

type mode int

const (
	forward mode = iota
	cut
	blackhole
	deaf // requests pass; a reply resets its connection
)

// dialTimeout bounds the connection to the target.
const dialTimeout = 5 * time.Second

// Proxy forwards TCP connections from Addr to a target address and injects
// faults into them on request.
type Proxy struct {
	ln     net.Listener
	ctx    context.Context // cancelled by Close: ends dials to the target
	cancel context.CancelFunc

	mu      sync.Mutex
	target  string // dialled by each new connection
	mode    mode
	delay   time.Duration
	changed chan struct{} // closed and replaced on every change of mode or delay
	links   map[*link]struct{}
	closed  bool

	wg sync.WaitGroup // the accept loop and every connection's goroutines
}

// New starts a proxy on a free port of 127.0.0.1 that forwards to target
// (host:port). The target is dialled per client connection, so it need not
// be up yet.
func New(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address clients should connect to (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards new connections to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetTarget makes the proxy forward the connections it connects from now
// on to target (host:port), as a client that learnt of a failover dials
// the new primary; the connections already connected stay with the old
// target until they end (see Reset), and the fault in force stays. A
// connection accepted while cut or black-holed is connected, to the
// target of that time, once the proxy forwards again.
func (p *Proxy) SetTarget(target string) error {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	return nil
}

// Reset resets every open connection once (RST on both sides), leaving
// the fault in force: the client reconnects, to the current target (see
// SetTarget).
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := p.snapshot()
	p.mu.Unlock()
	for _, l := range links {
		l.kill(true)
	}
}

// Cut resets every open connection and resets new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.setMode(cut)
	p.mu.Unlock()
	p.Reset() // a connection accepted meanwhile is reset as it starts
}

// Blackhole stops all traffic, keeping the sockets open, until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setMode(blackhole)
}

// DropReplies lets requests reach the server and resets each connection
// as soon as the server answers on it, until Heal: the request was applied,
// its reply never arrives (RELIABILITY.md's S9). New connections are
// connected as usual.
func (p *Proxy) DropReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setMode(deaf)
}

// Delay holds every chunk d before forwarding it (0 removes the delay),
// leaving Cut or Blackhole in force.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = max(d, 0)
	p.notify()
}

// Heal ends every fault: traffic flows again without delay, and bytes held
// by a black hole are delivered.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = 0
	p.setMode(forward)
}

// Conns returns the number of client connections the proxy holds now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops listening, closes every connection and waits until all of
// the proxy's goroutines have returned. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.notify()
	links := p.snapshot()
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for _, l := range links {
		l.kill(false)
	}
	p.wg.Wait()
	return err
}

// setMode changes the mode and wakes waiters; p.mu is held.
func (p *Proxy) setMode(m mode) {
	p.mode = m
	p.notify()
}

// notify wakes everyone waiting for a change; p.mu is held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// state returns the current fault settings and the channel closed on the
// next change.
func (p *Proxy) state() (mode, time.Duration, <-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed, p.closed
}

// snapshot lists the open links; p.mu is held.
func (p *Proxy) snapshot() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed (or a broken listener: nothing to serve)
		}
		l := &link{p: p, client: c.(*net.TCPConn), done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.kill(true)
			continue
		}
		p.links[l] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go l.serve()
	}
}

// forget removes a finished link.
func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// Hanging is p seen as a partition whose Cut black-holes instead of
// resetting: calls through it hang without a reply, as tck.Partition
// expects of a holder cut off from its store.
type Hanging struct{ *Proxy }

// Cut black-holes every connection, old and new, until Heal.
func (h Hanging) Cut() { h.Blackhole() }
