//go:build unix

package zkstore_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// Environment of the holder process of TestPausedHolderProcess.
const (
	envHolderServers = "ZKSTORE_TEST_HOLDER_SERVERS"
	envHolderRoot    = "ZKSTORE_TEST_HOLDER_ROOT"
	envHolderName    = "ZKSTORE_TEST_HOLDER_NAME"
	holderSession    = 2 * time.Second
)

// TestPausedHolderProcess (I3, S1): a holder process is stopped
// (SIGSTOP): its heartbeats stop with it, the server expires its session
// and deletes its node, and a waiter here is granted the lock. The
// holder's deadline, the instant it counts its lease lost, passed before
// the waiter's winning Acquire was sent; resumed, it reports the lease
// lost at once. (Times cross processes on the wall clock, which this test
// does not step.)
func TestPausedHolderProcess(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	const name = "s1/paused"
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$")
	cmd.Env = append(os.Environ(), envHolderServers+"="+strings.Join(srv.Servers(), ","),
		envHolderRoot+"="+srv.Root(), envHolderName+"="+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	held := readField(t, lines, "held")

	ws := observe(newStore(t, connect(t, srv.Servers(), tckSession), srv.Root()))
	wm := manager(t, ws, lease.WithTTL(holderSession*5/8), lease.WithTransition(holderSession*3/8))
	ctx := t.Context()
	waiter := acquireAsync(ctx, wm, name)
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	g := await(t, waiter, 10*holderSession, "takeover from a stopped holder")
	t.Logf("takeover %v after SIGSTOP", g.at.Sub(stopped))
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Unix(0, readField(t, lines, "lost"))
	if sent := ws.sentAt(g.l.Token()); !deadline.Before(sent) {
		t.Errorf("the stopped holder's deadline %v after SIGSTOP, the winning Acquire was sent %v after it: the holder must count its lease lost first",
			deadline.Sub(stopped), sent.Sub(stopped))
	}
	if uint64(held) >= g.l.Token() {
		t.Errorf("token %d after %d", g.l.Token(), held)
	}
	_ = g.l.Release(ctx)
}

// readField waits for the line "<key> <int>" and returns the int.
func readField(t *testing.T, lines <-chan string, key string) int64 {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the holder process ended before saying %q", key)
			}
			if v, ok := strings.CutPrefix(l, key+" "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("holder process: %q", l)
				}
				return n
			}
		case <-timeout:
			t.Fatalf("the holder process did not say %q within 30 s", key)
		}
	}
}

// TestHelperHolder is the holder process of TestPausedHolderProcess: it
// takes the lock, says "held <token>", and once the lease ends says
// "lost <deadline, Unix ns>". Its ttl + transition is twice its session
// timeout: only the session bounds its leases.
func TestHelperHolder(t *testing.T) {
	servers := os.Getenv(envHolderServers)
	if servers == "" {
		t.Skip("the holder process of TestPausedHolderProcess")
	}
	s := newStore(t, connect(t, strings.Split(servers, ","), holderSession), os.Getenv(envHolderRoot))
	m := manager(t, s, lease.WithTTL(2*holderSession*5/8), lease.WithTransition(2*holderSession*3/8))
	l, err := m.Acquire(t.Context(), os.Getenv(envHolderName))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("held %d\n", l.Token())
	<-l.Done()
	deadline := time.Now().Add(time.Until(l.Deadline())) // as wall time
	fmt.Printf("lost %d\n", deadline.UnixNano())
}
