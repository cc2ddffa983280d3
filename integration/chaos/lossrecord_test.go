package chaos

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// TestLossRecordedWhenTheLeaseEnded: a worker (or a leader) records a lease lost at its
// deadline at that deadline, however late its goroutine runs (here every
// reading of the run's clock comes 20 ms late, as on a loaded machine);
// the Manager cancelled the lease then, before it gave the grant back,
// which let the next holder in. Recorded when the goroutine ran, such a
// loss overlapped the next grant: the 30-minute campaign's
// "zookeeper-capped-2-w1 acquired token 5364 at 27m23.489594234s while
// zookeeper-capped-2-w2 (token 5357, acquired at 27m22.343817996s) held
// until 27m23.490158605s". A loss the store told before the deadline (a
// refused renewal) is recorded when told: an overlap with a grant made
// before the deadline is still seen.
func TestLossRecordedWhenTheLeaseEnded(t *testing.T) {
	for _, lead := range []bool{false, true} {
		for name, refuse := range map[string]bool{"at the deadline": false, "refused": true} {
			if lead {
				name = "leader " + name
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { lossRecord(t, lead, refuse) })
			})
		}
	}
}

// lossRecord runs one worker (lead: through a Contender) whose lease is
// lost (refuse: by a refused renewal) while it is mid-update, and checks
// when the loss was recorded.
func lossRecord(t *testing.T, lead, refuse bool) {
	mem := memstore.New()
	defer mem.Heal()
	store := &refusing{Store: mem}
	m, err := lease.NewManager(store, lease.WithTTL(campTTL), lease.WithTransition(campTr), lease.WithContenderID("w"))
	if err != nil {
		t.Fatal(err)
	}
	h := NewHistory()
	busy := make(chan struct{}) // the holder is mid-update past its deadline
	w := &Worker{Name: "w", Manager: m, Mutex: "m", Fenced: blocking{NewRegister(true), busy},
		Unfenced: NewRegister(false), History: lateClock{h, 20 * time.Millisecond}, Think: campThink, Lead: lead}
	w.leader.init()
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		if lead {
			w.RunLeader(ctx)
		} else {
			w.Run(ctx)
		}
	}()
	for h.Holder("m") == "" {
		time.Sleep(time.Millisecond)
	}
	synctest.Wait() // reading the register
	if refuse {
		store.refuse.Store(true)
	} else {
		mem.FailContender("w", memstore.FaultFail)
	}
	time.Sleep(2 * (campTTL + campTr))
	synctest.Wait()
	hs := h.Holds()
	cancel()
	close(busy)
	mem.Heal()
	<-ran
	m.Close(context.Background())
	if len(hs) == 0 || !hs[0].Lost || hs[0].Done == Open || hs[0].Deadline == 0 {
		t.Fatalf("holds %+v; want the first lost, with its deadline", hs)
	}
	switch hd := hs[0]; {
	case !refuse && hd.Done != hd.Deadline:
		t.Errorf("a loss at the deadline recorded at %v, its deadline %v; want the deadline", hd.Done, hd.Deadline)
	case refuse && hd.Done >= hd.Deadline:
		t.Errorf("a refused renewal recorded at %v, its deadline %v; want when told, before the deadline", hd.Done, hd.Deadline)
	}
}

// refusing is a store whose renewals are refused once refuse is set.
type refusing struct {
	lease.Store
	refuse atomic.Bool
}

func (s *refusing) Renew(ctx context.Context, m, c string, tok uint64, ttl, tr time.Duration) (lease.Record, error) {
	if s.refuse.Load() {
		return lease.Record{}, lease.ErrNotHeld
	}
	return s.Store.Renew(ctx, m, c, tok, ttl, tr)
}

// blocking is a Resource whose reads wait until busy is closed.
type blocking struct {
	Resource
	busy <-chan struct{}
}

func (b blocking) Read(client string, token uint64) (int, error) {
	<-b.busy
	return b.Resource.Read(client, token)
}

// lateClock is a History whose clock is read late by d: the recording
// goroutine of a loaded machine runs that long after it was woken.
type lateClock struct {
	*History
	d time.Duration
}

func (c lateClock) Now() time.Duration {
	time.Sleep(c.d)
	return c.History.Now()
}
