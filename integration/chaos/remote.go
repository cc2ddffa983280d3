package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The contender processes of a campaign reach the registers and the history
// of the campaign's process through a Hub: one Unix socket, one line per
// request and one per reply.
//
//	B client token sent acquired   → ok          a hold began
//	E client token done lost(0|1)  → ok          the holder learned it ended
//	R f|u client token             → v value | x error
//	W f|u client token value       → ok | x error
//	A client since                 → ok          it waits (since < 0: no longer)
//
// Times are on the run's clock, which every process reads from the
// system's monotonic clock ([SystemClock] minus the run's start).

// Hub serves one lane's registers and the run's history to contender
// processes.
type Hub struct {
	ln               net.Listener
	mutex            string
	h                *History
	fenced, unfenced *Register
	wg               sync.WaitGroup
	mu               sync.Mutex
	conns            map[net.Conn]struct{}
	closed           bool
	errs             []error // malformed requests: a bug of the campaign
}

// NewHub listens on the Unix socket path for contender processes of lock.
func NewHub(path, name string, h *History, fenced, unfenced *Register) (*Hub, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("chaos: hub: %w", err)
	}
	hub := &Hub{ln: ln, mutex: name, h: h, fenced: fenced, unfenced: unfenced, conns: map[net.Conn]struct{}{}}
	hub.wg.Go(hub.accept)
	return hub, nil
}

// Close stops serving, closes every connection (the processes take that
// as the end of the run) and waits for the hub's goroutines.
func (hub *Hub) Close() error {
	hub.mu.Lock()
	hub.closed = true
	for c := range hub.conns {
		_ = c.Close()
	}
	hub.mu.Unlock()
	err := hub.ln.Close()
	hub.wg.Wait()
	return err
}

// Err returns the malformed requests the hub received, joined.
func (hub *Hub) Err() error {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	return errors.Join(hub.errs...)
}

func (hub *Hub) accept() {
	for {
		c, err := hub.ln.Accept()
		if err != nil {
			return
		}
		hub.mu.Lock()
		if hub.closed {
			hub.mu.Unlock()
			_ = c.Close()
			return
		}
		hub.conns[c] = struct{}{}
		hub.mu.Unlock()
		hub.wg.Go(func() { hub.serve(c) })
	}
}

// serve answers one process until it goes away; holds it left open end
// then (as lost: its process is gone — killed, so the campaign marks them
// Stopped).
func (hub *Hub) serve(c net.Conn) {
	open := map[uint64]*Hold{} // by token
	waiters := map[string]bool{}
	defer func() {
		for c := range waiters { // its process is gone
			hub.h.Waiting(hub.mutex, c, -1)
		}
		for _, hd := range open {
			hub.h.End(hd, hub.h.Now(), true)
		}
		hub.mu.Lock()
		delete(hub.conns, c)
		hub.mu.Unlock()
		_ = c.Close()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "A" {
			waiters[f[1]] = true
		}
		reply, err := hub.handle(f, open)
		if err != nil {
			hub.mu.Lock()
			hub.errs = append(hub.errs, fmt.Errorf("chaos: hub: %q: %w", strings.TrimSpace(line), err))
			hub.mu.Unlock()
			reply = "x " + err.Error()
		}
		if _, err := w.WriteString(reply + "\n"); err != nil || w.Flush() != nil {
			return
		}
	}
}

func (hub *Hub) handle(f []string, open map[uint64]*Hold) (string, error) {
	num := func(i int) (int64, error) {
		if i >= len(f) {
			return 0, errors.New("missing field")
		}
		return strconv.ParseInt(f[i], 10, 64)
	}
	if len(f) < 3 {
		return "", errors.New("short request")
	}
	switch f[0] {
	case "A":
		t, err := num(2)
		if err != nil {
			return "", err
		}
		hub.h.Waiting(hub.mutex, f[1], time.Duration(t))
		return "ok", nil
	case "B", "E":
		tok, err1 := num(2)
		t, err2 := num(3)
		x, err3 := num(4)
		if err := errors.Join(err1, err2, err3); err != nil {
			return "", err
		}
		if f[0] == "B" {
			open[uint64(tok)] = hub.h.Begin(hub.mutex, f[1], uint64(tok), time.Duration(t), time.Duration(x))
		} else if hd := open[uint64(tok)]; hd != nil {
			hub.h.End(hd, time.Duration(t), x == 1)
			delete(open, uint64(tok))
		}
		return "ok", nil
	case "R", "W":
		reg := hub.unfenced
		if f[1] == "f" {
			reg = hub.fenced
		}
		tok, err := num(3)
		if err != nil || len(f) < 4 {
			return "", errors.Join(err, errors.New("short request"))
		}
		if f[0] == "R" {
			v, err := reg.Read(f[2], uint64(tok))
			if err != nil {
				return "x " + err.Error(), nil
			}
			return "v " + strconv.Itoa(v), nil
		}
		v, err := num(4)
		if err != nil {
			return "", err
		}
		if err := reg.Write(f[2], uint64(tok), int(v)); err != nil {
			return "x " + err.Error(), nil
		}
		return "ok", nil
	}
	return "", errors.New("unknown request")
}

// Remote is a contender process's side of a [Hub]: a [Recorder] and, via
// Fenced and Unfenced, the two [Resource]s. When the hub goes away, every
// call fails and Done is closed: the run is over.
type Remote struct {
	start time.Duration // the run's start on the system clock

	mu   sync.Mutex
	c    net.Conn
	r    *bufio.Reader
	dead chan struct{}
	once sync.Once
}

// DialHub connects to the hub at path for a run that started at start on
// the system clock.
func DialHub(ctx context.Context, path string, start time.Duration) (*Remote, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("chaos: hub: %w", err)
	}
	return &Remote{start: start, c: c, r: bufio.NewReader(c), dead: make(chan struct{})}, nil
}

// Done is closed when the hub went away.
func (rm *Remote) Done() <-chan struct{} { return rm.dead }

// Close closes the connection to the hub.
func (rm *Remote) Close() error {
	rm.once.Do(func() { close(rm.dead) })
	return rm.c.Close()
}

func (rm *Remote) call(format string, args ...any) (string, error) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if _, err := fmt.Fprintf(rm.c, format+"\n", args...); err != nil {
		_ = rm.Close()
		return "", err
	}
	line, err := rm.r.ReadString('\n')
	if err != nil {
		_ = rm.Close()
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// Now is the time on the run's clock.
func (rm *Remote) Now() time.Duration { return SystemClock() - rm.start }

// Begin records a hold at the hub.
func (rm *Remote) Begin(name, client string, token uint64, sent, acquired time.Duration) *Hold {
	_, _ = rm.call("B %s %d %d %d", client, token, int64(sent), int64(acquired))
	return &Hold{Mutex: name, Client: client, Token: token, Sent: sent, Acquired: acquired, Done: Open}
}

// End records at the hub when hd's holder learned it ended.
func (rm *Remote) End(hd *Hold, done time.Duration, lost bool) {
	l := 0
	if lost {
		l = 1
	}
	_, _ = rm.call("E %s %d %d %d", hd.Client, hd.Token, int64(done), l)
}

// Waiting records at the hub that client waits since since (< 0: no
// longer).
func (rm *Remote) Waiting(_, client string, since time.Duration) {
	_, _ = rm.call("A %s %d", client, int64(since))
}

// Fenced returns the hub's fenced register.
func (rm *Remote) Fenced() Resource { return remoteRegister{rm, "f"} }

// Unfenced returns the hub's unfenced register.
func (rm *Remote) Unfenced() Resource { return remoteRegister{rm, "u"} }

type remoteRegister struct {
	rm   *Remote
	kind string
}

func (r remoteRegister) Read(client string, token uint64) (int, error) {
	reply, err := r.rm.call("R %s %s %d", r.kind, client, token)
	if err != nil {
		return 0, err
	}
	if v, ok := strings.CutPrefix(reply, "v "); ok {
		return strconv.Atoi(v)
	}
	return 0, errors.New(reply)
}

func (r remoteRegister) Write(client string, token uint64, v int) error {
	reply, err := r.rm.call("W %s %s %d %d", r.kind, client, token, v)
	if err != nil {
		return err
	}
	if reply != "ok" {
		return errors.New(reply)
	}
	return nil
}
