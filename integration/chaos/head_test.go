package chaos

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestHeadBehind: a lane with a process that killed the head of the queue
// less often than it drew the average contender fault waits for a process
// at the head; a lane without processes, or one that draws only server
// faults, does not.
func TestHeadBehind(t *testing.T) {
	withProc := &lane{members: []member{{name: "w0", w: &Worker{}}, {name: "p0.1", p: &proc{}}}}
	noProc := &lane{members: []member{{name: "w0", w: &Worker{}}}}
	for _, c := range []struct {
		what  string
		l     *lane
		drawn map[string]int
		want  bool
	}{
		{"nothing drawn yet", withProc, map[string]int{}, false},
		{"head drawn as often as the rest", withProc, map[string]int{FaultBlackhole: 3, FaultCut: 3, FaultKillHead: 3}, false},
		{"head drawn less often", withProc, map[string]int{FaultBlackhole: 3, FaultCut: 3, FaultKillHead: 1}, true},
		{"head never drawn", withProc, map[string]int{FaultBlackhole: 1}, true},
		{"no process to kill", noProc, map[string]int{FaultBlackhole: 3}, false},
		{"server faults only", withProc, map[string]int{FaultRestartSrv: 5, FaultKillPush: 4}, false},
		{"server faults aside", withProc, map[string]int{FaultRestartSrv: 50, FaultClockForward: 40, FaultBlackhole: 2, FaultKillHead: 2}, false},
	} {
		if got := c.l.headBehind(c.drawn); got != c.want {
			t.Errorf("%s: headBehind(%v) = %v, want %v", c.what, c.drawn, got, c.want)
		}
	}
}

// TestAwaitHead: awaitHead returns once a process waits at the head of
// the queue with another waiter behind it, and at its bound otherwise.
func TestAwaitHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory()
		l := &lane{mutex: "m", h: h, members: []member{{name: "w0", w: &Worker{}}, {name: "p0.1", p: &proc{}}}}
		start := time.Now()
		h.Waiting("m", "w0", h.Now())
		time.Sleep(time.Second)
		h.Waiting("m", "p0.1", h.Now()) // behind w0: not the head
		l.awaitHead(context.Background(), 3*time.Second)
		if waited := time.Since(start) - time.Second; waited != 3*time.Second {
			t.Fatalf("a process behind an in-process worker: awaitHead returned after %v, want its bound 3s", waited)
		}
		go func() {
			time.Sleep(2 * time.Second)
			h.Waiting("m", "w0", -1)      // w0 got the lock...
			h.Waiting("m", "w0", h.Now()) // ...and queues again, behind p0.1
		}()
		start = time.Now()
		l.awaitHead(context.Background(), 10*time.Second)
		if waited := time.Since(start); waited > 2*time.Second+20*time.Millisecond {
			t.Fatalf("a process at the head with a waiter behind: awaitHead returned after %v, want about 2s", waited)
		}
	})
}
