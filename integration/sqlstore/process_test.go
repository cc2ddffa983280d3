package sqlstore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
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
	db, s := workingLiteStore(t, "stopped/writer")

	w := startWriter(t, db)
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	rec, err := s.Acquire(ctx, "stopped/writer", "b", time.Second, time.Second)
	cancel()
	if err == nil {
		t.Fatalf("Acquire while another process is stopped in a write transaction: %+v, want an error (the file is locked)", rec)
	}
	t.Logf("while the writer is stopped: %v", err)

	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	w.commit(t)
	if _, err := s.Acquire(t.Context(), "stopped/writer", "b", time.Second, time.Second); err != nil {
		t.Fatalf("Acquire after the writer resumed: %v", err)
	}
}

// workingLiteStore returns a migrated SQLite file and a Store on it, once
// the Store has taken the lock name for owner "a".
func workingLiteStore(t *testing.T, name string) (string, *sqlstore.Store) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "simba.db")
	sqlite.migrate(t, liteDSN(db))
	s := sqlite.newStore(t, liteDSN(db))
	if _, err := s.Acquire(t.Context(), name, "a", time.Second, time.Second); err != nil {
		t.Fatal(err) // the file and the store work
	}
	return db, s
}

// writer is a child process (TestSQLiteWriterProcess) inside a write
// transaction on a SQLite file.
type writer struct {
	cmd *exec.Cmd
	in  io.Closer
}

// startWriter starts a writer on the file db and returns once it is inside
// its transaction.
func startWriter(t *testing.T, db string) *writer {
	t.Helper()
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
	return &writer{cmd: cmd, in: in}
}

// commit makes the writer commit and waits for it to exit.
func (w *writer) commit(t *testing.T) {
	t.Helper()
	_ = w.in.Close()
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v", err)
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

// TestSQLiteBusyHonoursContext: with the recommended DSN, an Acquire whose
// context ends in 300 ms, on a file whose write lock another process
// holds, returns soon after its context ends — not after the driver's
// busy timeout, a wait inside a statement that no context interrupts.
func TestSQLiteBusyHonoursContext(t *testing.T) {
	db, s := workingLiteStore(t, "busy/ctx")

	w := startWriter(t, db)

	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	rec, err := s.Acquire(ctx, "busy/ctx", "b", time.Second, time.Second)
	took := time.Since(start)
	cancel()
	if err == nil {
		t.Fatalf("Acquire while another process holds the write lock: %+v, want an error", rec)
	}
	if took > 2*time.Second {
		t.Fatalf("Acquire with a 300 ms context returned after %v (%v), want within 2 s", took.Round(time.Millisecond), err)
	}
	t.Logf("Acquire with a 300 ms context returned after %v: %v", took.Round(time.Millisecond), err)
	w.commit(t)
}

// TestSQLiteLongBusyTimeoutWarns: NewSQLite on a database whose
// connections wait 10 s for a locked file logs a warning naming
// busy_timeout; with the recommended DSN it logs nothing.
func TestSQLiteLongBusyTimeoutWarns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "simba.db")
	sqlite.migrate(t, liteDSN(db))
	for _, tc := range []struct {
		dsn  string
		warn bool
	}{
		{strings.Replace(liteDSN(db), "busy_timeout(100)", "busy_timeout(10000)", 1), true},
		{liteDSN(db), false},
	} {
		var buf bytes.Buffer
		sqlite.newStore(t, tc.dsn, sqlstore.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		if got := strings.Contains(buf.String(), "busy_timeout"); got != tc.warn {
			t.Errorf("NewSQLite(%q) logged %q, want a busy_timeout warning: %v", tc.dsn, buf.String(), tc.warn)
		}
	}
}

// TestSQLiteMigrateWaitsForWriter: with the recommended short busy
// timeout, schema.Migrate on a file whose write lock another process
// holds waits for it (as simba's CLI does at every start, beside running
// contenders) instead of failing after 100 ms with SQLITE_BUSY.
func TestSQLiteMigrateWaitsForWriter(t *testing.T) {
	db := filepath.Join(t.TempDir(), "simba.db")
	sqlite.migrate(t, liteDSN(db))
	w := startWriter(t, db)
	done := make(chan error, 1)
	go func() { done <- schema.Migrate(t.Context(), sqlite.open(t, liteDSN(db)), schema.SQLite) }()
	select {
	case err := <-done:
		t.Fatalf("Migrate while another process holds the write lock returned %v, want it to wait", err)
	case <-time.After(time.Second):
	}
	w.commit(t)
	if err := <-done; err != nil {
		t.Fatalf("Migrate after the writer committed: %v", err)
	}
}
