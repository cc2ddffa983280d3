//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// electLog is the log the elect tests' CMD writes: "lead TOKEN OWNER" when
// it starts, "stop TOKEN" on SIGTERM, "exit TOKEN" when it exits by itself
// (once the file quit-TOKEN exists). The trap comes first: a SIGTERM right
// after "lead" is logged must find it installed.
const electScript = `trap 'echo "stop $SIMBA_TOKEN" >> "$LOG"; exit 0' TERM
echo "lead $SIMBA_TOKEN $SIMBA_OWNER" >> "$LOG"
while [ ! -e "$DIR/quit-$SIMBA_TOKEN" ]; do sleep 0.02; done
echo "exit $SIMBA_TOKEN" >> "$LOG"; exit 3`

type electEvent struct {
	what  string
	token uint64
	owner string
}

func readElectLog(t *testing.T, path string) []electEvent {
	t.Helper()
	b, _ := os.ReadFile(path)
	var evs []electEvent
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var ev electEvent
		f := strings.Fields(l)
		if len(f) < 2 {
			t.Fatalf("log line %q", l)
		}
		ev.what = f[0]
		fmt.Sscan(f[1], &ev.token)
		if len(f) > 2 {
			ev.owner = f[2]
		}
		evs = append(evs, ev)
	}
	return evs
}

// TestElect: of two simba elect processes exactly one runs CMD; SIGTERM to
// the leader stops its CMD before the other's starts, with a larger token,
// and exits 0; a CMD that exits by itself makes its simba resign to the
// other.
func TestElect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	log := e.path("log")
	e.vars = append(e.vars, "SIMBA_STORE="+sqliteURL(e), "LOG="+log, "DIR="+e.dir)
	elect := func() *proc {
		return e.start("elect", "--ttl", "3s", "--transition", "2s", "leader", "--", "sh", "-c", electScript)
	}
	procs := []*proc{elect(), elect()}
	// byOwner finds the simba process whose contender id names its pid.
	byOwner := func(owner string) (*proc, *proc) {
		for i, p := range procs {
			if strings.Contains(owner, fmt.Sprintf(":%d:", p.cmd.Process.Pid)) {
				return p, procs[1-i]
			}
		}
		t.Fatalf("no simba process for owner %q", owner)
		return nil, nil
	}
	lines := func(n int) []electEvent {
		eventually(t, 30*time.Second, fmt.Sprintf("%d log lines", n), func() bool { return len(readElectLog(t, log)) >= n })
		evs := readElectLog(t, log)
		if len(evs) != n {
			t.Fatalf("log has %d lines, want %d: %+v", len(evs), n, evs)
		}
		return evs
	}

	first := lines(1)[0]
	leader, follower := byOwner(first.owner)
	time.Sleep(300 * time.Millisecond) // a second leader would have shown up by now
	lines(1)

	leader.signal(t, syscall.SIGTERM)
	if r := leader.wait(t, 30*time.Second); r.code != 0 {
		t.Errorf("leader after SIGTERM: exit %d, want 0; stderr %q", r.code, r.stderr)
	}
	evs := lines(3)
	if evs[1] != (electEvent{what: "stop", token: first.token}) || evs[2].what != "lead" || evs[2].token <= first.token {
		t.Fatalf("after SIGTERM to the leader: %+v; want its CMD stopped, then the other leading with a larger token", evs)
	}
	if p, _ := byOwner(evs[2].owner); p != follower {
		t.Fatal("the stopped leader leads again")
	}

	// A CMD that exits by itself: its simba resigns to the new contender.
	procs = []*proc{follower, elect()}
	second := evs[2]
	if err := os.WriteFile(e.path(fmt.Sprintf("quit-%d", second.token)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	evs = lines(5)
	if evs[3] != (electEvent{what: "exit", token: second.token}) || evs[4].what != "lead" || evs[4].token <= second.token {
		t.Fatalf("after CMD exited by itself: %+v; want a new leader with a larger token", evs)
	}
	if p, _ := byOwner(evs[4].owner); p == follower {
		t.Error("the leader whose CMD exited did not resign")
	}
	for _, p := range procs {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		if r := p.wait(t, 30*time.Second); r.code != 0 {
			t.Errorf("after SIGTERM: exit %d, want 0; stderr %q", r.code, r.stderr)
		}
	}
	if evs := readElectLog(t, log); evs[len(evs)-1].what != "stop" {
		t.Errorf("the last leader's CMD was not stopped: %+v", evs)
	}
}

// TestElectLost is S1 for elect: a leader stopped (SIGSTOP) past ttl +
// transition loses leadership to the other process; continued, it kills
// its CMD at once (SIGTERM ignored: SIGKILL within half the safety margin)
// and stays a follower.
func TestElectLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	log := e.path("log")
	e.vars = append(e.vars, "SIMBA_STORE="+sqliteURL(e), "LOG="+log, "DIR="+e.dir)
	elect := func() *proc {
		return e.start("elect", "--ttl", "2s", "--transition", "1s", "--grace", "500ms", "leader", "--", "sh", "-c",
			`trap '' TERM; echo $$ > "$DIR/pid-$SIMBA_TOKEN"; echo "lead $SIMBA_TOKEN $SIMBA_OWNER" >> "$LOG"; exec sleep 30`)
	}
	a, b := elect(), elect()
	eventually(t, 30*time.Second, "a leader", func() bool { return len(readElectLog(t, log)) == 1 })
	first := readElectLog(t, log)[0]
	leader, follower := a, b
	if !strings.Contains(first.owner, fmt.Sprintf(":%d:", a.cmd.Process.Pid)) {
		leader, follower = b, a
	}
	leader.signal(t, syscall.SIGSTOP)
	eventually(t, 30*time.Second, "the other leads", func() bool { return len(readElectLog(t, log)) == 2 })
	second := readElectLog(t, log)[1]
	if second.token <= first.token || !strings.Contains(second.owner, fmt.Sprintf(":%d:", follower.cmd.Process.Pid)) {
		t.Fatalf("after the leader stopped: %+v; want the other leading with a larger token", second)
	}
	leader.signal(t, syscall.SIGCONT)
	b1, _ := os.ReadFile(e.path(fmt.Sprintf("pid-%d", first.token)))
	var pid int
	fmt.Sscan(string(b1), &pid)
	eventually(t, 3*time.Second, "the old leader's CMD is killed", func() bool { return pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
	time.Sleep(300 * time.Millisecond) // the old leader must not lead again meanwhile
	if evs := readElectLog(t, log); len(evs) != 2 {
		t.Errorf("log %+v: the old leader leads again", evs)
	}
	for _, p := range []*proc{leader, follower} {
		p.signal(t, syscall.SIGTERM)
		if r := p.wait(t, 30*time.Second); r.code != 0 {
			t.Errorf("after SIGTERM: exit %d; stderr %q", r.code, r.stderr)
		}
	}
}
