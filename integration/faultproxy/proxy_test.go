package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/integration/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// short is how long a request waits before it counts as unanswered.
const short = 300 * time.Millisecond

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	return server(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// taggedServer answers each line of every connection with tag, a colon
// and the line, until the test ends: it tells servers apart.
func taggedServer(t *testing.T, tag string) string {
	return server(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(tag + ":" + line)); err != nil {
				return
			}
		}
	})
}

// server serves every connection with serve, then closes it, until the
// test ends.
func server(t *testing.T, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); serve(c); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// client is a line-oriented connection through the proxy.
type client struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{Conn: c, r: bufio.NewReader(c)}
}

// refused checks that a new connection through the proxy is reset: at
// dial (the reset may beat connect's return on loopback) or at the first
// round trip, and promptly, not by a timeout.
func refused(t *testing.T, addr, what string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		defer c.Close()
		cl := &client{Conn: c, r: bufio.NewReader(c)}
		err = cl.roundTrip("x", time.Second)
	}
	if err == nil || isTimeout(err) {
		t.Fatalf("%s: %v, want a reset", what, err)
	}
}

// send writes a line without waiting for the answer.
func (c *client) send(line string) error {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := c.Write([]byte(line + "\n"))
	return err
}

// recv reads one line, waiting at most d.
func (c *client) recv(d time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// roundTrip sends a line and expects it back within d.
func (c *client) roundTrip(line string, d time.Duration) error {
	if err := c.send(line); err != nil {
		return err
	}
	got, err := c.recv(d)
	if err != nil {
		return err
	}
	if got != line {
		return errors.New("echo " + got + ", want " + line)
	}
	return nil
}

// silent sends a line on c and checks that no answer comes within short.
func silent(t *testing.T, c *client, line, what string) {
	t.Helper()
	if err := c.send(line); err != nil {
		t.Fatal(err)
	}
	if _, err := c.recv(short); !isTimeout(err) {
		t.Fatalf("%s: %v, want a timeout", what, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestForward(t *testing.T) {
	t.Parallel()
	target := echoServer(t)
	p := newProxy(t, target)
	if p.Target() != target || !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("addr %s target %s", p.Addr(), p.Target())
	}
	c := dial(t, p.Addr())
	for _, line := range []string{"a", strings.Repeat("x", 100000)} {
		if err := c.roundTrip(line, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns = %d", n)
	}
}

// TestSetTarget: a failover. New connections go to the new target while
// the open ones stay with the old server, whatever the fault in force;
// Reset moves the open ones (they are reset, the client reconnects) and
// leaves the fault.
func TestSetTarget(t *testing.T) {
	t.Parallel()
	p := newProxy(t, taggedServer(t, "old"))
	answer := func(c *client, line string) string {
		t.Helper()
		if err := c.send(line); err != nil {
			t.Fatal(err)
		}
		got, err := c.recv(time.Second)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return got
	}
	stay := dial(t, p.Addr())
	if got := answer(stay, "a"); got != "old:a" {
		t.Fatalf("before SetTarget: %q", got)
	}
	if err := p.SetTarget("no port"); err == nil {
		t.Fatal("SetTarget of an address without a port: no error")
	}
	newAddr := taggedServer(t, "new")
	if err := p.SetTarget(newAddr); err != nil {
		t.Fatal(err)
	}
	if p.Target() != newAddr {
		t.Fatalf("Target = %s, want %s", p.Target(), newAddr)
	}
	if got := answer(stay, "b"); got != "old:b" {
		t.Fatalf("open connection after SetTarget: %q, want the old server", got)
	}
	if got := answer(dial(t, p.Addr()), "c"); got != "new:c" {
		t.Fatalf("new connection after SetTarget: %q, want the new server", got)
	}
	// A connection accepted in a black hole is connected once healed, to
	// the target of that time.
	p.Blackhole()
	held := dial(t, p.Addr())
	if err := held.send("d"); err != nil {
		t.Fatal(err)
	}
	p.Reset() // the fault stays: no byte moves, nobody reconnects
	if _, err := stay.recv(time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("open connection after Reset: %v, want a reset", err)
	}
	late := dial(t, p.Addr())
	silent(t, late, "e", "new connection after Reset in a black hole")
	p.Heal()
	if got, err := late.recv(time.Second); err != nil || got != "new:e" {
		t.Fatalf("after Heal: %q, %v; want the new server", got, err)
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if err := c.roundTrip("before", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	_, err := c.recv(time.Second)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("open connection after Cut: %v, want a reset", err)
	}
	// While cut, new connections are accepted and reset.
	refused(t, p.Addr(), "new connection while cut")
	p.Heal()
	if err := dial(t, p.Addr()).roundTrip("after", time.Second); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestBlackhole(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if err := c.roundTrip("before", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	silent(t, c, "held", "request through a black hole")
	fresh := dial(t, p.Addr()) // accepted, but silent
	silent(t, fresh, "fresh", "new connection in a black hole")

	p.Heal()
	// The sockets were never closed: the held bytes arrive now.
	if got, err := c.recv(time.Second); err != nil || got != "held" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
	if got, err := fresh.recv(time.Second); err != nil || got != "fresh" {
		t.Fatalf("new connection after Heal: %q, %v", got, err)
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	p := newProxy(t, echoServer(t))
	c := dial(t, p.Addr())
	if err := c.roundTrip("warm", time.Second); err != nil {
		t.Fatal(err)
	}
	const d = 150 * time.Millisecond
	p.Delay(d)
	begin := time.Now()
	if err := c.roundTrip("slow", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Held d on the way there and d on the way back.
	if rtt := time.Since(begin); rtt < 2*d || rtt > 20*d {
		t.Fatalf("round trip with delay %v took %v", d, rtt)
	}
	p.Heal()
	begin = time.Now()
	if err := c.roundTrip("fast", time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(begin); rtt >= d {
		t.Fatalf("round trip after Heal took %v", rtt)
	}
}

func TestTargetDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close()
	refused(t, newProxy(t, down).Addr(), "through a proxy to a closed port")
}

// closeTag tags the answers of TestCloseEndsEverything's target.
const closeTag = "closed-proxy-target"

func TestCloseEndsEverything(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.New(taggedServer(t, closeTag))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if err := c.send("x"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.recv(time.Second); err != nil || got != closeTag+":x" {
		t.Fatalf("before Close: %q, %v; want %q", got, err, closeTag+":x")
	}
	p.Blackhole()
	_ = c.send("held") // a pump waits in the black hole
	begin := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("Close took %v", took)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.recv(time.Second); err == nil || isTimeout(err) {
		t.Fatalf("connection after Close: %v, want closed", err)
	}
	stillForwards(t, p.Addr())
}

// stillForwards fails the test if a new connection to addr, a closed
// proxy's address, reaches the proxy's target: a line comes back with the
// target's tag. The port is free once the proxy closes, so a dial may
// still succeed without the proxy: another process may listen on it, or
// the kernel may give the dial the same port as its source, a TCP
// self-connection that echoes what it sends. Neither answers with the tag.
func stillForwards(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	cl := &client{Conn: c, r: bufio.NewReader(c)}
	if err := cl.send("after"); err != nil {
		return
	}
	if got, err := cl.recv(short); err == nil && strings.HasPrefix(got, closeTag+":") {
		t.Fatalf("a connection to %s after Close reached the target: %q", addr, got)
	}
}

func TestNewRejectsBadTarget(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"", "no-port", "1.2.3.4"} {
		if p, err := faultproxy.New(target); err == nil {
			_ = p.Close()
			t.Errorf("New(%q) succeeded", target)
		}
	}
}

func TestDropReplies(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4) // every line the server applied
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a server that applies one line per connection, then answers
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					got <- strings.TrimSuffix(line, "\n")
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	p := newProxy(t, ln.Addr().String())
	c := dial(t, p.Addr())
	if err := c.roundTrip("before", time.Second); err != nil {
		t.Fatal(err)
	}
	<-got
	p.DropReplies()
	if err := c.send("applied"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.recv(time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reply while replies are dropped: %v, want a reset", err)
	}
	select {
	case line := <-got:
		if line != "applied" {
			t.Fatalf("server applied %q", line)
		}
	case <-time.After(time.Second):
		t.Fatal("the request did not reach the server")
	}
	p.Heal()
	if err := dial(t, p.Addr()).roundTrip("after", time.Second); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
