package sqlstore_test

import (
	"net"
	"sync"
	"testing"
)

// proxy is a TCP proxy whose traffic can be black-holed (tck.Partition):
// while cut, bytes are read but not forwarded until healed, so calls hang
// without a reply. A stand-in until internal/faultproxy exists.
type proxy struct {
	ln     net.Listener
	target string
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	heal  chan struct{} // nil while healed; closed by Heal
	conns map[net.Conn]struct{}
}

// newProxy listens on a free port and forwards to target until the test
// ends.
func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{ln: ln, target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Cut black-holes the traffic of every connection, old and new.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heal == nil {
		p.heal = make(chan struct{})
	}
}

// Heal lets traffic through again.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heal != nil {
		close(p.heal)
		p.heal = nil
	}
}

// gate blocks while the proxy is cut; false when the proxy closes.
func (p *proxy) gate() bool {
	p.mu.Lock()
	h := p.heal
	p.mu.Unlock()
	if h == nil {
		return true
	}
	select {
	case <-h:
		return true
	case <-p.done:
		return false
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			return
		}
		p.wg.Add(2)
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		for _, c := range cs {
			c.Close()
		}
		return false
	default:
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst through the gate; when either side ends it
// closes both.
func (p *proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
