// Package chaos is the fault campaign's record keeping: the history of a
// run (holds and register operations, every one on the run's monotonic
// clock), the fenced and unfenced registers the workload writes through,
// and the checker of RELIABILITY.md's invariants over a history.
//
// A hold is one lease as its holder saw it: when the winning acquire was
// sent, when it returned, and when the holder learned the lease was over
// (Done, or the return of its Release). Every contender shares the run's
// clock — contender processes too, through the system's monotonic clock —
// so the intervals of different contenders can be compared directly (I3,
// I6). A process the nemesis stopped (SIGSTOP) learns of its loss only when
// it runs again; its holds over a stop are judged by the fenced register,
// the server's record of its writes (I2), instead.
package chaos

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Open marks a hold that had not ended when the history was taken.
const Open time.Duration = -1

// Hold is one lease of one contender, times on the run's clock.
type Hold struct {
	Mutex  string
	Client string // the contender id
	Token  uint64
	// Sent is when the acquire that granted the lease was sent (the grant
	// happened after it), Acquired when it returned.
	Sent, Acquired time.Duration
	// Done is when the holder learned the lease was over: Done() closed or
	// Release returned. Open while it holds.
	Done time.Duration
	// Lost is true when the lease ended by loss, not by Release.
	Lost bool
	// Deadline is the lease's last deadline (when Held turned false
	// unless renewed), where the worker knew it: a violation shows it
	// beside Done, which a loaded machine can make later than the
	// deadline. 0 when unknown.
	Deadline time.Duration
	// Stopped is true when the holder's process was stopped (SIGSTOP) or
	// killed while it held: it could not be told in time, so its Done says
	// nothing about I3 (see [History.Stopped]).
	Stopped bool
}

// stop is a span of time in which a contender's process did not run.
type stop struct {
	client   string
	from, to time.Duration
}

// History collects holds and register operations from concurrent
// contenders. The zero value is not usable: make one with [NewHistory].
type History struct {
	now func() time.Duration

	mu    sync.Mutex
	holds []*Hold
	stops []stop
	waits map[string]wait // by client: who waits for a grant, since when
	spans []Wait          // every wait, in the order they began
	open  map[string]int  // by client: its open wait in spans
	steps []Detection
}

// Wait is one contender's wait for a grant of a lock: from when it asked
// to when it no longer waited (granted, failed or gone; Open while it
// waits).
type Wait struct {
	Mutex, Client string
	From, To      time.Duration
}

// wait is a contender's wait for a grant of lock, since when it asked.
type wait struct {
	mutex string
	since time.Duration
}

// Detection is a server clock step that a contender's Manager reported
// (its "clock_step" log event), on the run's clock.
type Detection struct {
	Client  string
	At      time.Duration
	Forward bool
}

// NewHistory starts the run's clock on the time package's monotonic clock
// (fake time inside a testing/synctest bubble).
func NewHistory() *History {
	start := time.Now()
	return &History{now: func() time.Duration { return time.Since(start) }}
}

// NewSystemHistory starts the run's clock at start on the system's
// monotonic clock (see [SystemClock]), which other processes of the machine
// read too.
func NewSystemHistory(start time.Duration) *History {
	return &History{now: func() time.Duration { return SystemClock() - start }}
}

// Now is the time on the run's monotonic clock.
func (h *History) Now() time.Duration { return h.now() }

// Stopped records that client's process did not run from from to to (a
// SIGSTOP, or a kill: from the kill to the end of the run). Its holds that
// overlap the span are marked Stopped.
func (h *History) Stopped(client string, from, to time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stops = append(h.stops, stop{client, from, to})
}

// EndOpen ends every open hold of client at done, as lost: its process
// is gone.
func (h *History) EndOpen(client string, done time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.holds {
		if hd.Client == client && hd.Done == Open {
			hd.Done, hd.Lost = done, true
		}
	}
}

// Begin records a lease that was just granted and returns its hold, to be
// ended with End.
func (h *History) Begin(name, client string, token uint64, sent, acquired time.Duration) *Hold {
	hd := &Hold{Mutex: name, Client: client, Token: token, Sent: sent, Acquired: acquired, Done: Open}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, hd)
	return hd
}

// End records when hd's holder learned its lease was over. The first
// call counts: a holder that let go and then saw Done ended at the former.
func (h *History) End(hd *Hold, done time.Duration, lost bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hd.Done == Open {
		hd.Done, hd.Lost = done, lost
	}
}

// SetDeadline records hd's last deadline (see [Hold.Deadline]).
func (h *History) SetDeadline(hd *Hold, deadline time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd.Deadline = deadline
}

// Waiting records that client asked for lock at since and waits for it
// (queued in the store while it is refused), or, with since < 0, that it
// no longer waits.
func (h *History) Waiting(name, client string, since time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, ok := h.open[client]; ok {
		h.spans[i].To = max(h.now(), h.spans[i].From)
		delete(h.open, client)
	}
	if since < 0 {
		delete(h.waits, client)
		return
	}
	if h.waits == nil {
		h.waits, h.open = map[string]wait{}, map[string]int{}
	}
	h.waits[client] = wait{name, since}
	h.open[client] = len(h.spans)
	h.spans = append(h.spans, Wait{Mutex: name, Client: client, From: since, To: Open})
}

// Waits returns every wait recorded so far.
func (h *History) Waits() []Wait {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.spans)
}

// Waiters returns the clients waiting for lock, the longest waiting (the
// head of a fair queue) first.
func (h *History) Waiters(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ws []string
	for c, w := range h.waits {
		if w.mutex == name {
			ws = append(ws, c)
		}
	}
	slices.SortFunc(ws, func(a, b string) int { return cmp.Compare(h.waits[a].since, h.waits[b].since) })
	return ws
}

// ClockStep records a server clock step that client's Manager detected.
func (h *History) ClockStep(client string, at time.Duration, forward bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps = append(h.steps, Detection{client, at, forward})
}

// Detections returns the clock steps detected so far.
func (h *History) Detections() []Detection {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.steps)
}

// Holder returns the client of an open hold of lock, "" when none.
func (h *History) Holder(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.holds) - 1; i >= 0; i-- {
		if hd := h.holds[i]; hd.Mutex == name && hd.Done == Open {
			return hd.Client
		}
	}
	return ""
}

// Holds returns a copy of the holds recorded so far.
func (h *History) Holds() []Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Hold, len(h.holds))
	for i, hd := range h.holds {
		out[i] = *hd
		end := hd.Done
		if end == Open {
			end = math.MaxInt64
		}
		for _, s := range h.stops {
			if s.client == hd.Client && s.from <= end && s.to >= hd.Acquired {
				out[i].Stopped = true
			}
		}
	}
	return out
}

// Violation is one breach of an invariant, with what shows it.
type Violation struct {
	Invariant string // "I1", "I2", ...
	Detail    string
	// At is when, on the run's clock, the breach happened (the second
	// hold's acquisition of an overlap), or -1 when it has no one time.
	At time.Duration
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

func violation(inv, format string, args ...any) Violation {
	return Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...), At: -1}
}
