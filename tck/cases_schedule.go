package tck

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// The fifth case of Simba's TCK: a schedule run by the leader only.

// caseSchedule: Schedule with FixedDelay runs work on the leader only, with
// at least the period between runs; Running is true from Schedule to Stop;
// Stop cancels a running work's context and waits for it to return (the
// work goes on for ttl/10 after its context ended); the other Manager's
// Scheduler then takes over; nothing runs after both stopped, and no two
// runs ever overlap.
func caseSchedule(e *env) {
	m1, m2 := e.newManager(), e.newManager()
	name := e.name("schedule")
	period := e.ttl / 4
	type run struct {
		who        string
		start, end time.Time
	}
	var (
		mu       sync.Mutex
		runs     []run
		active   atomic.Int32
		overlaps atomic.Int32
		returned atomic.Bool // the blocking run of m1 has seen its ctx end
	)
	started := make(chan string, 1024)
	blocking := make(chan struct{}) // closed: m1's next run works until its ctx ends
	blocked := make(chan struct{}, 1)
	work := func(who string, canBlock bool) func(context.Context) error {
		return func(ctx context.Context) error {
			if active.Add(1) != 1 {
				overlaps.Add(1)
			}
			r := run{who: who, start: time.Now()}
			started <- who
			if canBlock && closed(blocking) {
				select {
				case blocked <- struct{}{}:
				default:
				}
				<-ctx.Done()
				time.Sleep(e.ttl / 10) // finishing its work
				returned.Store(true)
			}
			r.end = time.Now()
			mu.Lock()
			runs = append(runs, r)
			mu.Unlock()
			active.Add(-1)
			return nil
		}
	}
	schedule := func(m *lease.Manager, canBlock bool) *lease.Scheduler {
		s, err := lease.Schedule(m, name, lease.FixedDelay(period), work(m.ID(), canBlock))
		if err != nil {
			e.t.Fatalf("Schedule: %v", err)
		}
		if !s.Running() {
			e.t.Errorf("Running() = false right after Schedule")
		}
		return s
	}

	s1 := schedule(m1, true)
	for i := range 3 {
		if who := recv(e, started, e.takeover(), fmt.Sprintf("run %d", i+1)); who != m1.ID() {
			e.t.Fatalf("run %d by %s, want the only scheduler %s", i+1, who, m1.ID())
		}
	}
	s2 := schedule(m2, false)
	time.Sleep(2 * period) // the follower must stay idle meanwhile
	close(blocking)
	recv(e, blocked, 2*period+e.prompt(), "m1's next run")
	stopBegan := time.Now()
	e.stopScheduler(s1)
	stopped := time.Now()
	if !returned.Load() {
		e.t.Errorf("Stop returned before the running work returned")
	}
	for recv(e, started, e.takeover(), "a run of the second scheduler after the first stopped") != m2.ID() {
	}
	e.stopScheduler(s2)
	if err := s1.Stop(e.ctx); err != nil {
		e.t.Errorf("second Stop: %v", err)
	}
	for len(started) > 0 {
		<-started
	}
	time.Sleep(2 * period)
	if len(started) > 0 {
		e.t.Errorf("work ran after both schedulers stopped")
	}

	if n := overlaps.Load(); n != 0 {
		e.t.Errorf("%d runs overlapped another run", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range runs {
		if r.who == m1.ID() && r.start.After(stopped) {
			e.t.Errorf("%s ran %v after its Stop returned", r.who, r.start.Sub(stopped))
		}
		if r.who == m2.ID() && r.start.Before(stopBegan) {
			e.t.Errorf("%s ran while %s led", r.who, m1.ID())
		}
	}
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		if prev.who == cur.who && cur.start.Sub(prev.end) < period*9/10 {
			e.t.Errorf("FixedDelay(%v): a run of %s started %v after the previous one ended", period, cur.who, cur.start.Sub(prev.end))
		}
	}
}
