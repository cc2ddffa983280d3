package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// childEnv makes the test binary a waiter process: "addr prefix lock".
const childEnv = "REDISSTORE_TEST_WAITER"

// Timings of TestCrashedHeadWaiter: the old owner's transition ends long
// after the hand-off window.
const (
	crashTTL    = 4 * time.Second
	crashTr     = 2 * time.Second
	crashWindow = 100 * time.Millisecond
)

// childWaiter waits for a lock as the contender "child" through a
// Manager, as `simba run` does, after saying on stdout that it is queued.
// It never returns by itself: the test kills it.
func childWaiter() {
	f := strings.Fields(os.Getenv(childEnv))
	c := redis.NewClient(&redis.Options{Addr: f[0], ClientName: "child"})
	s, err := redisstore.New(c, redisstore.WithKeyPrefix(f[1]), redisstore.WithHandoff(crashWindow))
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	if rec, err := s.Acquire(context.Background(), f[2], "child", crashTTL, crashTr); err != nil || rec.Held("child") {
		fmt.Println("not queued:", rec, err)
		os.Exit(2)
	}
	m, err := lease.NewManager(s, lease.WithContenderID("child"), lease.WithTTL(crashTTL), lease.WithTransition(crashTr))
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println("queued")
	_, err = m.Acquire(context.Background(), f[2])
	fmt.Println("acquire returned:", err)
	os.Exit(2)
}

// TestCrashedHeadWaiter: the waiter at the head of the queue is a process
// killed with SIGKILL. A release reserves the lock for it and wakes it;
// the next live waiter must get the lock about one hand-off window later,
// not at the old owner's transition end (seconds later).
func TestCrashedHeadWaiter(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	direct := dial(t, srv.Addr())
	store := func(name string) *redisstore.Store {
		return newStore(t, dialNamed(t, srv.Addr(), name), srv.KeyPrefix(), redisstore.WithHandoff(crashWindow))
	}
	manager := func(s *redisstore.Store, id string) *lease.Manager {
		m, err := lease.NewManager(s, lease.WithContenderID(id), lease.WithTTL(crashTTL), lease.WithTransition(crashTr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close(bg) })
		return m
	}
	holder := manager(store("holder"), "holder")
	l, err := holder.Acquire(bg, "job")
	if err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+srv.Addr()+" "+srv.KeyPrefix()+" job")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "queued\n" {
		t.Fatalf("waiter process: %q, %v", line, err)
	}
	waitFor(t, "the waiter process's subscription", func() bool { return pubsubConnsOf(t, direct, "child") == 1 })

	ws := store("next")
	if rec := mustLoseFor(t, ws, "job", "next"); rec.OwnerID != "holder" { // queued after the child
		t.Fatalf("next's first attempt: %+v", rec)
	}
	got := make(chan time.Time, 1)
	go func() {
		if _, err := manager(ws, "next").Acquire(bg, "job"); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	waitFor(t, "next's subscription", func() bool { return pubsubConnsOf(t, direct, "next") == 1 })

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	released := time.Now()
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
	const bound = 10 * crashWindow // the old owner's transition ended crashTTL + crashTr after its last renewal
	select {
	case at := <-got:
		t.Logf("next granted %v after the release (window %v, old owner's span %v)", at.Sub(released), crashWindow, crashTTL+crashTr)
		if d := at.Sub(released); d > bound {
			t.Fatalf("next granted %v after the release, want about the window %v (at most %v)", d, crashWindow, bound)
		}
	case <-time.After(2 * (crashTTL + crashTr)):
		t.Fatalf("next not granted within %v of the release", 2*(crashTTL+crashTr))
	}
}

// mustLoseFor is mustLose with the crash test's timings.
func mustLoseFor(t testing.TB, s lease.Store, name, contender string) lease.Record {
	t.Helper()
	rec, err := s.Acquire(bg, name, contender, crashTTL, crashTr)
	if err != nil || rec.Held(contender) {
		t.Fatalf("Acquire(%q, %q) = %+v, %v; want a loss", name, contender, rec, err)
	}
	return rec
}
