package sqlstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// envChildTx names the SQLite file in which a child of
// TestSQLiteStoppedWriterBlocks holds a write transaction open.
const envChildTx = "SIMBA_SQLSTORE_CHILD_TX"

// TestSQLiteStoppedWriterBlocks: a process stopped (SIGSTOP) inside a
// write transaction on the file — as a holder stopped during a renewal is
// — keeps every other process from writing it, so no contender can take
// the lock, however long ago the stopped holder's lease ended, until it
// resumes: an embedded single-file store shares its write lock with every
// process (make chaos, 2026-11-24: a holder stopped for 5.5 s and the
// next grant 28 ms after it resumed).
func TestSQLiteStoppedWriterBlocks(t *testing.T) {
	db := filepath.Join(t.TempDir(), "simba.db")
	sqlite.migrate(t, liteDSN(db))
	// A short busy timeout keeps the test short: the driver's wait for a
	// locked file does not end with the context.
	s := sqlite.newStore(t, strings.Replace(liteDSN(db), "busy_timeout(10000)", "busy_timeout(500)", 1))
	if _, err := s.Acquire(t.Context(), "stopped/writer", "a", time.Second, time.Second); err != nil {
		t.Fatal(err) // the file and the store work
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteWriterProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChildTx+"="+db)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "in tx\n" {
		t.Fatalf("writer process: %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	rec, err := s.Acquire(ctx, "stopped/writer", "b", time.Second, time.Second)
	cancel()
	if err == nil {
		t.Fatalf("Acquire while another process is stopped in a write transaction: %+v, want an error (the file is locked)", rec)
	}
	t.Logf("while the writer is stopped: %v", err)

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	_ = in.Close() // the writer commits and exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v", err)
	}
	if _, err := s.Acquire(t.Context(), "stopped/writer", "b", time.Second, time.Second); err != nil {
		t.Fatalf("Acquire after the writer resumed: %v", err)
	}
}

// TestSQLiteWriterProcess is the writer of TestSQLiteStoppedWriterBlocks
// when run as its child: it opens a write transaction (BEGIN IMMEDIATE,
// as the store's DSN asks), says so, and commits when its stdin closes;
// otherwise it returns at once.
func TestSQLiteWriterProcess(t *testing.T) {
	db := os.Getenv(envChildTx)
	if db == "" {
		return
	}
	tx, err := sqlite.open(t, liteDSN(db)).BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("in tx")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
