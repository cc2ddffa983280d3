package memstore_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func TestBadInputIsATypedError(t *testing.T) {
	s := memstore.New()
	okName, okID := mx, "a"
	badNames := []string{"", strings.Repeat("n", lease.MaxNameLength+1), "bad\xff", "nul\x00"}
	// NUL is refused as the real stores must (PostgreSQL text cannot hold
	// it), so a unit test on memstore cannot pass with an id they reject.
	badIDs := []string{"", strings.Repeat("c", lease.MaxContenderIDLength+1), "bad\xfe", "id\x00with nul"}
	for _, name := range badNames {
		_, err := s.Acquire(bg, name, okID, ttl, tr)
		wantErr(t, "Acquire name", err, lease.ErrInvalidName)
		_, err = s.Renew(bg, name, okID, 1, ttl, tr)
		wantErr(t, "Renew name", err, lease.ErrInvalidName)
		wantErr(t, "Release name", s.Release(bg, name, okID, 1), lease.ErrInvalidName)
		_, err = s.Get(bg, name)
		wantErr(t, "Get name", err, lease.ErrInvalidName)
		_, err = s.Watch(bg, name, "")
		wantErr(t, "Watch name", err, lease.ErrInvalidName)
	}
	for _, id := range badIDs {
		_, err := s.Acquire(bg, okName, id, ttl, tr)
		wantErr(t, "Acquire id", err, lease.ErrInvalidArgument)
		_, err = s.Renew(bg, okName, id, 1, ttl, tr)
		wantErr(t, "Renew id", err, lease.ErrInvalidArgument)
		wantErr(t, "Release id", s.Release(bg, okName, id, 1), lease.ErrInvalidArgument)
		if id != "" { // "" is an observer
			_, err = s.Watch(bg, okName, id)
			wantErr(t, "Watch id", err, lease.ErrInvalidArgument)
		}
	}
	for _, d := range []struct{ ttl, tr time.Duration }{
		{0, tr}, {-time.Second, tr}, {time.Millisecond - 1, tr}, {ttl, -1},
	} {
		_, err := s.Acquire(bg, okName, okID, d.ttl, d.tr)
		wantErr(t, "Acquire timings", err, lease.ErrInvalidArgument)
		_, err = s.Renew(bg, okName, okID, 1, d.ttl, d.tr)
		wantErr(t, "Renew timings", err, lease.ErrInvalidArgument)
	}
	var nilCtx context.Context
	_, err := s.Acquire(nilCtx, okName, okID, ttl, tr)
	wantErr(t, "nil ctx", err, lease.ErrInvalidArgument)
	_, err = s.RenewMany(nilCtx, nil)
	wantErr(t, "nil ctx", err, lease.ErrInvalidArgument)
	_, err = s.Watch(nilCtx, okName, "")
	wantErr(t, "nil ctx", err, lease.ErrInvalidArgument)
	if st := s.Inspect(okName); st.Owner != "" || len(st.Queue) != 0 || st.Counter != 0 {
		t.Fatalf("bad input changed the state: %+v", st)
	}
	if n := s.Stats().Total(); n != 0 {
		t.Fatalf("bad input counted %d round trips", n)
	}
}

func TestOddButValidInputIsAccepted(t *testing.T) {
	s := memstore.New()
	names := []string{"{slot}", "a/b:c d", "ünï", strings.Repeat("x", lease.MaxNameLength), "{", "}"}
	for i, name := range names {
		mustHold(t, s, name, strings.Repeat("c", lease.MaxContenderIDLength))
		mustHold(t, s, "unicode-id/"+strconv.Itoa(i), "ïd {x}:y/z")
	}
	if got := len(s.Mutexes()); got != 2*len(names) {
		t.Fatalf("%d locks for %d distinct names", got, 2*len(names))
	}
	// Extreme durations saturate instead of wrapping into the past.
	rec, err := s.Acquire(bg, "huge", "a", math.MaxInt64, math.MaxInt64)
	if err != nil || !rec.Held("a") || rec.TTL <= 0 || rec.Transition < rec.TTL {
		t.Fatalf("Acquire with huge timings = %+v, %v", rec, err)
	}
	mustLose(t, s, "huge", "b")
	if _, err := s.Acquire(bg, "huge", "b", time.Millisecond, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	wantQueue(t, s, "huge", "b")
}

// TestConcurrentUseIsExclusive runs contenders on the real clock under the
// race detector: at most one holds the lock at a time, and tokens grow in
// grant order.
func TestConcurrentUseIsExclusive(t *testing.T) {
	s := memstore.New(memstore.WithHandoff(time.Millisecond))
	var (
		mu      sync.Mutex
		holder  string
		last    uint64
		granted int
	)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	if _, err := s.Watch(ctx, mx, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		id := string(rune('a' + i))
		wg.Go(func() {
			events, err := s.Watch(ctx, mx, id)
			if err != nil {
				t.Error(err)
				return
			}
			for n := 0; n < 200; n++ {
				rec, err := s.Acquire(bg, mx, id, time.Hour, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if !rec.Held(id) {
					select { // a hint, or a short poll
					case <-events:
					case <-time.After(time.Millisecond):
					}
					continue
				}
				mu.Lock()
				if holder != "" || rec.Token <= last {
					t.Errorf("%s got token %d while %q held, last %d", id, rec.Token, holder, last)
				}
				holder, last = id, rec.Token
				granted++
				mu.Unlock()
				if _, err := s.RenewMany(bg, []lease.RenewRequest{{Name: mx, Contender: id, Token: rec.Token, TTL: time.Hour}}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				holder = ""
				mu.Unlock()
				if err := s.Release(bg, mx, id, rec.Token); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if granted == 0 || last != uint64(granted) {
		t.Fatalf("%d grants, last token %d", granted, last)
	}
}
