package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// loseRenewReplies makes every renewal reach the store and lose its
// reply: the grant stays live on the server while the holder's deadline is
// never extended.
func loseRenewReplies(op memstore.Op, _, _ string) memstore.Fault {
	if op == memstore.OpRenew || op == memstore.OpRenewMany {
		return memstore.FaultLoseReply
	}
	return memstore.FaultNone
}

// TestAbandonedGrantIsNotReused (issue 14 item 2, S16): when Stop's ctx
// ends before the callback returns, the grant is abandoned. If renewals
// reached the store but their replies were lost, the grant is still live
// on the server after the abandoned lease's deadline; the next Acquire of
// the same Manager must not be handed that grant and its token while the
// abandoned OnAcquired still runs: it gets a new grant with a greater one.
//
// The next Acquire comes at once (the Manager still contends for the name)
// or after the Manager gave the name up, but before the grant lapses.
func TestAbandonedGrantIsNotReused(t *testing.T) {
	for _, later := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run("after "+later.String(), func(t *testing.T) { testAbandonedGrantIsNotReused(t, later) })
	}
}

func testAbandonedGrantIsNotReused(t *testing.T, later time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		m := newMgr(t, watching(r), "a")
		leading, finish := make(chan *lease.Lease, 1), make(chan struct{})
		returned := make(chan struct{})
		c, err := m.Contend("job", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {
				defer close(returned)
				leading <- l
				<-finish // stuck: ignores its ctx
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		first := <-leading
		r.SetFault(loseRenewReplies)
		time.Sleep(2 * time.Second) // renewals land, their replies do not
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		err = c.Stop(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with a stuck callback: %v, want DeadlineExceeded", err)
		}
		r.Heal()
		time.Sleep(later)
		l, err := m.Acquire(bg, "job")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-returned:
			t.Fatal("the abandoned callback returned: the test no longer shows an overlap")
		default:
		}
		if l.Token() <= first.Token() {
			t.Errorf("Acquire after an abandoned Stop got token %d, want greater than the abandoned grant's %d "+
				"(the abandoned OnAcquired still runs under it)", l.Token(), first.Token())
		}
		if s := r.Inspect("job"); s.Owner != "a" || s.Token != l.Token() {
			t.Errorf("store state %+v, want a holding token %d", s, l.Token())
		}
		_ = l.Release(bg)
		close(finish)
		<-returned
	})
}
