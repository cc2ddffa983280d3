package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// Environment of a contender process started by TestSQLiteProcesses.
const (
	envChildDB  = "SIMBA_SQLSTORE_CHILD_DB"
	envChildLog = "SIMBA_SQLSTORE_CHILD_LOG"
	childRounds = 15
)

// TestSQLiteProcesses: two OS processes contend on one SQLite file, each
// holding the lock childRounds times and writing "start TOKEN" and "end
// TOKEN" lines to one log while it holds. The log must show every hold
// alone (no interleaving) and tokens that strictly increase.
func TestSQLiteProcesses(t *testing.T) {
	dir := t.TempDir()
	db, logPath := filepath.Join(dir, "simba.db"), filepath.Join(dir, "holds.log")
	sqlite.migrate(t, liteDSN(db))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, 2)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSQLiteContenderProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChildDB+"="+db, envChildLog+"="+logPath)
		out := new(strings.Builder)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("process %d output:\n%s", i, out)
			}
		})
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*2*childRounds {
		t.Fatalf("log has %d lines, want %d", len(lines), 4*childRounds)
	}
	var last uint64
	pids := map[string]int{}
	for i := 0; i < len(lines); i += 2 {
		var start, end struct {
			tok uint64
			pid string
		}
		_, err1 := fmt.Sscanf(lines[i], "start %d %s", &start.tok, &start.pid)
		_, err2 := fmt.Sscanf(lines[i+1], "end %d %s", &end.tok, &end.pid)
		if err1 != nil || err2 != nil || start != end {
			t.Fatalf("lines %d-%d interleave: %q, %q", i+1, i+2, lines[i], lines[i+1])
		}
		if start.tok <= last {
			t.Fatalf("line %d: token %d after %d, want strictly increasing", i+1, start.tok, last)
		}
		last = start.tok
		pids[start.pid]++
	}
	if len(pids) != 2 {
		t.Errorf("holds per process %v, want both processes", pids)
	}
}

// TestSQLiteContenderProcess is the contender of TestSQLiteProcesses when
// run as its child; otherwise it returns at once.
func TestSQLiteContenderProcess(t *testing.T) {
	db, logPath := os.Getenv(envChildDB), os.Getenv(envChildLog)
	if db == "" {
		return // not a child: nothing to do, nothing to check
	}
	s := sqlite.newStore(t, liteDSN(db))
	m, err := lease.NewManager(s, lease.WithTTL(2*time.Second), lease.WithTransition(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	pid := strconv.Itoa(os.Getpid())
	for range childRounds {
		l, err := m.Acquire(t.Context(), "processes/one-file")
		if err != nil {
			t.Fatal(err)
		}
		appendLine(t, logPath, fmt.Sprintf("start %d %s", l.Token(), pid))
		time.Sleep(5 * time.Millisecond)
		appendLine(t, logPath, fmt.Sprintf("end %d %s", l.Token(), pid))
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func appendLine(t *testing.T, path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}
