//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// TestRunHeld, on the default store (a SQLite file created in the user's
// state directory): CMD gets SIMBA_LOCK/OWNER/TOKEN; --no-wait and --wait
// on a held lock exit 75 quickly, naming the holder; status shows the
// holder; SIGINT while waiting exits 130; SIGTERM to simba reaches CMD,
// whose exit status simba passes through.
func TestRunHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.vars = append(e.vars, "DIR="+e.dir)
	holder := e.start("run", "job", "--", "sh", "-c",
		`trap 'echo TERM > "$DIR/trap"; exit 7' TERM
echo "$SIMBA_LOCK $SIMBA_OWNER $SIMBA_TOKEN" > "$DIR/env.tmp" && mv "$DIR/env.tmp" "$DIR/env"
while :; do sleep 0.05; done`)
	eventually(t, 30*time.Second, "the holder's CMD runs", func() bool { return fileHas(e.path("env"), "job") })
	if _, err := os.Stat(filepath.Join(e.dir, ".local", "state", "simba", "simba.db")); err != nil {
		t.Errorf("the default store was not created: %v", err)
	}
	b, _ := os.ReadFile(e.path("env"))
	f := strings.Fields(string(b))
	if len(f) != 3 || f[0] != "job" || !strings.Contains(f[1], ":") {
		t.Fatalf("CMD's SIMBA_LOCK SIMBA_OWNER SIMBA_TOKEN = %q", b)
	}
	owner := f[1]
	token, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil || token == 0 {
		t.Fatalf("SIMBA_TOKEN = %q", f[2])
	}

	r := e.run("run", "--no-wait", "job", "--", "true")
	if line := oneErrorLine(t, r, codeBusy); !strings.Contains(line, owner) {
		t.Errorf("the busy message does not name the holder %s: %s", owner, line)
	}
	if r.took > 5*time.Second {
		t.Errorf("--no-wait took %v", r.took)
	}
	r = e.run("run", "--wait", "300ms", "job", "--", "true")
	oneErrorLine(t, r, codeBusy)
	if r.took < 300*time.Millisecond || r.took > 5*time.Second {
		t.Errorf("--wait 300ms gave up after %v", r.took)
	}

	checkStatus(t, e, "job", owner, token)

	// The waiter logs its wait at debug level: a SIGINT sent before simba
	// catches it would kill it by the default action (a loaded machine
	// may take long to start it), which is not what is tested here.
	waiter := e.start("run", "--log-level", "debug", "job", "--", "sh", "-c", "echo ran > \"$DIR/waiter\"")
	eventually(t, 30*time.Second, "the waiter waits", func() bool {
		return strings.Contains(waiter.stderr.String(), "event="+lease.EventWaiting)
	})
	waiter.signal(t, syscall.SIGINT)
	r = waiter.wait(t, 30*time.Second)
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); r.code != codeSignal+int(syscall.SIGINT) ||
		!strings.HasPrefix(lines[len(lines)-1], "simba: run: interrupted by interrupt") {
		t.Errorf("an interrupted waiter: exit %d, stderr %q; want %d and the interruption last",
			r.code, r.stderr, codeSignal+int(syscall.SIGINT))
	}
	if fileHas(e.path("waiter"), "ran") {
		t.Error("an interrupted waiter ran its CMD")
	}

	holder.signal(t, syscall.SIGTERM)
	r = holder.wait(t, 30*time.Second)
	if r.code != 7 || !fileHas(e.path("trap"), "TERM") {
		t.Errorf("after SIGTERM to simba: exit %d (want CMD's 7), CMD saw TERM: %v; stderr %q", r.code, fileHas(e.path("trap"), "TERM"), r.stderr)
	}
	r = e.run("run", "--no-wait", "job", "--", "sh", "-c", "exit 42")
	if r.code != 42 || r.stderr != "" {
		t.Errorf("released lock, CMD exits 42: simba exit %d, stderr %q", r.code, r.stderr)
	}
	r = e.run("run", "job", "--", "sh", "-c", "kill -KILL $$")
	if r.code != codeSignal+int(syscall.SIGKILL) {
		t.Errorf("CMD killed by SIGKILL: simba exit %d, want %d", r.code, codeSignal+int(syscall.SIGKILL))
	}
	r = e.run("run", "job", "--", "no-such-command-simba-test")
	oneErrorLine(t, r, codeNotFound)
}

// checkStatus checks simba status (JSON, table, and the listing) while
// owner holds name with token.
func checkStatus(t *testing.T, e *env, name, owner string, token uint64) {
	t.Helper()
	r := e.run("status", "--json", name, "free-lock")
	var rows []lockStatus
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || r.code != 0 {
		t.Fatalf("status --json: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	if len(rows) != 2 || rows[0].Lock != name || rows[0].Owner != owner || rows[0].Token != token ||
		rows[0].TTLMs <= 0 || rows[0].TransitionMs < rows[0].TTLMs || rows[1].Owner != "" {
		t.Errorf("status --json = %+v; want %s held by %s with token %d, then a free lock", rows, name, owner, token)
	}
	r = e.run("status")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "LOCK") ||
		!slices.Equal(strings.Fields(lines[1])[:3], []string{name, owner, strconv.FormatUint(token, 10)}) {
		t.Errorf("status (listing): exit %d, stdout:\n%s", r.code, r.stdout)
	}
	// The columns line up.
	if i, j := strings.Index(lines[0], "OWNER"), strings.Index(lines[1], owner); i != j {
		t.Errorf("status table not aligned:\n%s", r.stdout)
	}
}

// TestRunNoOverlap: simba run processes contending for one lock run their
// commands one at a time, in token order (SQLite and PostgreSQL).
func TestRunNoOverlap(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "")
		testNoOverlap(t, e, sqliteURL(e))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "")
		store := postgresURL(t)
		r := e.run("run", "--store", store, "job", "--", "true")
		if line := oneErrorLine(t, r, codeUnavailable); !strings.Contains(line, "simba migrate up") {
			t.Errorf("before migrating: %s; want a hint to run simba migrate up", line)
		}
		if r := e.run("migrate", "--store", store, "up"); r.code != 0 {
			t.Fatalf("migrate up: exit %d: %s", r.code, r.stderr)
		}
		testNoOverlap(t, e, store)
	})
}

func testNoOverlap(t *testing.T, e *env, store string) {
	const workers, rounds = 2, 5
	log := e.path("log")
	e.vars = append(e.vars, "SIMBA_STORE="+store, "LOG="+log)
	script := `echo "start $SIMBA_TOKEN $(date +%s%N)" >> "$LOG"; sleep 0.05; echo "end $SIMBA_TOKEN $(date +%s%N)" >> "$LOG"`
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range rounds {
				r := e.start("run", "job", "--", "sh", "-c", script).wait(t, 30*time.Second)
				if r.code != 0 {
					errs <- fmt.Errorf("simba run: exit %d: %s", r.code, r.stderr)
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*workers*rounds {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*workers*rounds, b)
	}
	var last uint64
	var gaps []time.Duration
	var endedAt int64
	for i := 0; i < len(lines); i += 2 {
		var tokS, tokE uint64
		var atS, atE int64
		_, err1 := fmt.Sscanf(lines[i], "start %d %d", &tokS, &atS)
		_, err2 := fmt.Sscanf(lines[i+1], "end %d %d", &tokE, &atE)
		if err := errors.Join(err1, err2); err != nil || tokS != tokE || tokS <= last {
			t.Fatalf("lines %d-%d interleave or tokens do not grow (after %d):\n%s", i+1, i+2, last, b)
		}
		if endedAt != 0 {
			gaps = append(gaps, time.Duration(atS-endedAt))
		}
		last, endedAt = tokS, atE
	}
	slices.Sort(gaps)
	t.Logf("%s: from one CMD's end to the next CMD's start: median %v, max %v", store[:strings.Index(store, ":")], gaps[len(gaps)/2], gaps[len(gaps)-1])
}

// TestRunLostLease is S1 of RELIABILITY.md: a holder stopped (SIGSTOP) past
// ttl + transition loses the lock to another process, which gets a larger
// token; continued (SIGCONT), the holder terminates its CMD at once (a CMD
// that ignores SIGTERM gets SIGKILL within half the safety margin, not
// after --grace) and exits 76.
func TestRunLostLease(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "")
		testLostLease(t, e, sqliteURL(e))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, "")
		store := postgresURL(t)
		if r := e.run("migrate", "--store", store, "up"); r.code != 0 {
			t.Fatalf("migrate up: exit %d: %s", r.code, r.stderr)
		}
		testLostLease(t, e, store)
	})
}

func testLostLease(t *testing.T, e *env, store string) {
	log := e.path("log")
	e.vars = append(e.vars, "SIMBA_STORE="+store, "LOG="+log, "DIR="+e.dir)
	timing := []string{"--ttl", "2s", "--transition", "1s"} // a call timeout of 500 ms: no spurious loss on a loaded machine
	holder := e.start(append(append([]string{"run"}, timing...), "job", "--", "sh", "-c",
		`trap '' TERM; echo $$ > "$DIR/pid"; echo "start $SIMBA_TOKEN" >> "$LOG"; sleep 30; echo "end $SIMBA_TOKEN" >> "$LOG"`)...)
	eventually(t, 30*time.Second, "the holder's CMD starts", func() bool { return fileHas(log, "start") })
	stopped := time.Now() // before the stop: the measured wait is never shorter than the real one
	holder.signal(t, syscall.SIGSTOP)

	other := e.start(append(append([]string{"run"}, timing...), "job", "--", "sh", "-c",
		`echo "start $SIMBA_TOKEN" >> "$LOG"; echo "end $SIMBA_TOKEN" >> "$LOG"`)...)
	r := other.wait(t, 10*time.Second)
	if r.code != 0 {
		t.Fatalf("the other run: exit %d: %s", r.code, r.stderr)
	}
	// The holder held its lease when stopped, so its last confirmed grant
	// runs on past its local deadline by the safety margin (500 ms) at
	// least; how much longer depends on when its last renewal landed,
	// which a loaded machine delays.
	if took := time.Since(stopped); took < 500*time.Millisecond {
		t.Errorf("the other run got the lock %v after the holder stopped: before the holder's grant could lapse", took)
	}
	var t1, t2 uint64
	b, _ := os.ReadFile(log)
	if _, err := fmt.Sscanf(string(b), "start %d\nstart %d\nend %d\n", &t1, &t2, &t2); err != nil || t2 <= t1 {
		t.Fatalf("log (%v):\n%s\nwant the holder's start, then the other's start and end with a larger token", err, b)
	}

	holder.signal(t, syscall.SIGCONT)
	continued := time.Now()
	r = holder.wait(t, 30*time.Second)
	if line := finalErrorLine(t, r, codeLost); !strings.Contains(line, "lost") {
		t.Errorf("holder: %s", line)
	}
	if took := time.Since(continued); took > 3*time.Second {
		t.Errorf("the continued holder took %v to end its CMD", took)
	}
	pid, _ := os.ReadFile(e.path("pid"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if n <= 0 {
		t.Fatalf("CMD's pid %q", pid)
	}
	if err := syscall.Kill(n, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the holder's CMD (pid %d) still runs: %v", n, err)
	}
	if fileHas(log, fmt.Sprintf("end %d", t1)) {
		t.Errorf("the holder's CMD finished its work after losing the lease:\n%s", b)
	}
}

// TestRunKilled is S2 for the CLI: when simba itself is killed (SIGKILL),
// its CMD does not run on without the lock, and another run takes the lock
// after ttl + transition.
func TestRunKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.vars = append(e.vars, "SIMBA_STORE="+sqliteURL(e), "DIR="+e.dir)
	timing := []string{"--ttl", "500ms", "--transition", "250ms"}
	holder := e.start(append(append([]string{"run"}, timing...), "job", "--", "sh", "-c",
		`echo $$ > "$DIR/pid.tmp"; mv "$DIR/pid.tmp" "$DIR/pid"; exec sleep 30`)...)
	eventually(t, 30*time.Second, "CMD starts", func() bool { return fileHas(e.path("pid"), "\n") })
	b, _ := os.ReadFile(e.path("pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	holder.signal(t, syscall.SIGKILL)
	holder.wait(t, 30*time.Second)
	eventually(t, 2*time.Second, "CMD ends with simba", func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
	r := e.run(append(append([]string{"run"}, timing...), "job", "--", "true")...)
	if r.code != 0 {
		t.Errorf("after the holder was killed: exit %d, %s", r.code, r.stderr)
	}
}
