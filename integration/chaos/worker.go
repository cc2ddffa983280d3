package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/simba-go/simba/lease"
)

// Resource is what the workload increments: a [Register], or one in another
// process.
type Resource interface {
	Read(client string, token uint64) (int, error)
	Write(client string, token uint64, v int) error
}

// Recorder keeps the holds: a [History], or one in another process.
type Recorder interface {
	Now() time.Duration
	Begin(mutex, client string, token uint64, sent, acquired time.Duration) *Hold
	End(hd *Hold, done time.Duration, lost bool)
	// Waiting records that client asked for lock at since and waits,
	// or with since < 0 that it no longer waits.
	Waiting(mutex, client string, since time.Duration)
}

// Worker is one contender of a campaign: it loops acquire, read–sleep–write
// through both registers, release, and records every hold in the history.
type Worker struct {
	Name     string         // the contender id of its Manager
	Manager  *lease.Manager // its own, with its own store client
	Mutex    string
	Fenced   Resource
	Unfenced Resource
	History  Recorder
	// Think is the sleep between read and write: the window in which a
	// fault that costs the lease finds the holder mid-update.
	Think time.Duration
	// Turns makes every other hold, at random, a quick one: it thinks
	// a few milliseconds instead of Think (see Setup.Turns).
	Turns bool

	// Lead runs the worker through a Contender ([Worker.RunLeader]).
	Lead bool
	// NewManager makes the worker a new Manager (with its store client
	// and contender id) after its callback closed the last one; only a
	// Lead worker needs it.
	NewManager func() (*lease.Manager, error)

	pause  pauser
	leader leaderState
}

// Run loops until ctx ends and returns how many increments the fenced
// register accepted from it.
func (w *Worker) Run(ctx context.Context) int {
	done := 0
	for ctx.Err() == nil {
		sent := w.History.Now()
		w.History.Waiting(w.Mutex, w.Name, sent)
		l, err := w.Manager.Acquire(ctx, w.Mutex)
		w.History.Waiting(w.Mutex, w.Name, -1)
		if err != nil {
			if !sleep(ctx, 10*time.Millisecond) { // the store is away: try again
				return done
			}
			continue
		}
		hd := w.History.Begin(w.Mutex, w.Name, l.Token(), sent, w.History.Now())
		ended := make(chan struct{})
		go func() { // a loss is recorded when the holder is told
			defer close(ended)
			<-l.Done()
			if errors.Is(l.Err(), lease.ErrLost) {
				w.endLost(hd, l)
			}
		}()
		if w.cycle(l) {
			done++
		}
		if l.Held() {
			// The holder stops believing before it lets go.
			w.History.End(hd, w.History.Now(), false)
		} else {
			// Its deadline passed (Held says so from then on) before
			// Done closed: a Release now ends it as released, not
			// lost, so the loss is recorded here, at the deadline.
			w.History.End(hd, w.History.Now()-max(0, time.Since(l.Deadline())), true)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = l.Release(rctx)
		cancel()
		<-ended
	}
	return done
}

// endLost records that hd's lease l was lost. Lost at its deadline, it
// ended then: Held is false from then on, and the Manager cancels the
// lease before it gives the grant back, which may let the next holder in
// before the goroutine that records it runs on a loaded machine. A loss
// the store told earlier (a refused renewal) ended when told.
func (w *Worker) endLost(hd *Hold, l *lease.Lease) {
	now := w.History.Now()
	deadline := now - time.Since(l.Deadline())
	if r, ok := w.History.(interface{ SetDeadline(*Hold, time.Duration) }); ok { // in process
		r.SetDeadline(hd, deadline)
	}
	w.History.End(hd, min(now, deadline), true)
}

// cycle increments both registers once under l; true when the fenced
// write was accepted.
func (w *Worker) cycle(l *lease.Lease) bool {
	ctx, tok := l.Context(), l.Token()
	fv, ferr := w.Fenced.Read(w.Name, tok)
	uv, _ := w.Unfenced.Read(w.Name, tok)
	think := w.Think
	if w.Turns && rand.IntN(2) == 0 {
		think = time.Duration(rand.Int64N(int64(quickThink)))
	}
	if !sleep(ctx, think) {
		return false
	}
	if ctx.Err() != nil { // told it lost the lease: do not write
		return false
	}
	if d := w.pause.take(); d > 0 {
		time.Sleep(d) // stopped between its check and its write, unaware
	}
	_ = w.Unfenced.Write(w.Name, tok, uv+1)
	return ferr == nil && w.Fenced.Write(w.Name, tok, fv+1) == nil
}

// quickThink bounds the think of a quick hold (Worker.Turns).
const quickThink = 20 * time.Millisecond

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
