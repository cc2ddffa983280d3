package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// limited is a store with a known grant limit (as zkstore's session
// timeout is).
type limited struct {
	lease.Store
	limit time.Duration
}

func (s limited) MaxGrant() time.Duration { return s.limit }

// TestNewManagerRefusesAGrantLimitBelowTheMargin (issue 14 item 4): a
// store that says it grants at most limit makes NewManager fail when
// nothing of such a grant is left after the safety margin, naming the
// numbers.
func TestNewManagerRefusesAGrantLimitBelowTheMargin(t *testing.T) {
	for _, tc := range []struct {
		limit, ttl, transition time.Duration
		ok                     bool
	}{
		{40 * time.Second, 10 * time.Second, 90 * time.Second, false}, // simba run --transition 90s on ZooKeeper
		{40 * time.Second, 410 * time.Second, 6 * time.Second, false}, // --ttl 410s
		{3 * time.Second, 10 * time.Second, 6 * time.Second, false},   // safety 3s: nothing left
		{40 * time.Second, 10 * time.Second, 6 * time.Second, true},   // the defaults fit
		{12 * time.Second, 10 * time.Second, 6 * time.Second, true},   // capped, 9s left after the margin
		{0, 10 * time.Second, 90 * time.Second, true},                 // 0: no known limit
	} {
		st := limited{memstore.New(), tc.limit}
		m, err := lease.NewManager(st, lease.WithTTL(tc.ttl), lease.WithTransition(tc.transition))
		if tc.ok {
			if err != nil {
				t.Errorf("limit %v, ttl %v, transition %v: %v", tc.limit, tc.ttl, tc.transition, err)
				continue
			}
			_ = m.Close(bg)
			continue
		}
		if !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("limit %v, ttl %v, transition %v: NewManager gave %v, want ErrInvalidArgument",
				tc.limit, tc.ttl, tc.transition, err)
			continue
		}
		for _, d := range []time.Duration{tc.limit, tc.ttl, tc.transition} {
			if !strings.Contains(err.Error(), d.String()) {
				t.Errorf("error %q does not name %v", err, d)
			}
		}
	}
}

// errSpun stops a Manager that spins, so that the test ends.
var errSpun = errors.New("test: too many store calls")

// capped cuts every grant of its memstore to limit, as a store with an
// unknown limit would, and counts the calls. After 10,000 calls it fails
// every call (a spinning Manager then backs off, and the test ends).
type capped struct {
	*memstore.Store
	limit time.Duration
	calls atomic.Int64
}

func (s *capped) cut(ttl, transition time.Duration) (time.Duration, time.Duration) {
	ttl = min(ttl, s.limit)
	return ttl, min(transition, s.limit-ttl)
}

func (s *capped) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if s.calls.Add(1) > 10000 {
		return lease.Record{}, errSpun
	}
	ttl, transition = s.cut(ttl, transition)
	return s.Store.Acquire(ctx, name, contender, ttl, transition)
}

func (s *capped) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	if s.calls.Add(1) > 10000 {
		return lease.Record{}, errSpun
	}
	ttl, transition = s.cut(ttl, transition)
	return s.Store.Renew(ctx, name, contender, token, ttl, transition)
}

func (s *capped) Release(ctx context.Context, name, contender string, token uint64) error {
	if s.calls.Add(1) > 10000 {
		return errSpun
	}
	return s.Store.Release(ctx, name, contender, token)
}

// TestShortGrantIsNeverRetriedInALoop (issue 14 item 4): a store that
// grants less than the safety margin (here 400ms against a margin of
// 500ms) makes every grant dead on arrival. Acquire and TryAcquire fail at
// once with ErrGrantTooShort and give the grant back; a Contender backs
// off instead of spinning. Counted in store calls.
func TestShortGrantIsNeverRetriedInALoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &capped{Store: memstore.New(), limit: 400 * time.Millisecond}
		m := newMgr(t, st, "a")
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		_, err := m.Acquire(ctx, "job")
		if !errors.Is(err, lease.ErrGrantTooShort) {
			t.Errorf("Acquire: %v, want ErrGrantTooShort", err)
		}
		if n := st.calls.Load(); n > 3 {
			t.Errorf("Acquire made %d store calls, want at most 3 (acquire, release)", n)
		}
		if s := st.Inspect("job"); s.Owner != "" {
			t.Errorf("the short grant was not given back: %+v", s)
		}
		st.calls.Store(0)
		if _, err := m.TryAcquire(bg, "job"); !errors.Is(err, lease.ErrGrantTooShort) {
			t.Errorf("TryAcquire: %v, want ErrGrantTooShort", err)
		}
		if n := st.calls.Load(); n > 3 {
			t.Errorf("TryAcquire made %d store calls, want at most 3", n)
		}

		st.calls.Store(0)
		c, err := m.Contend("job", lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) {
			t.Error("led on a grant shorter than the safety margin")
		}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if err := c.Stop(bg); err != nil {
			t.Error(err)
		}
		// Back-off from ttl/50 up to ttl/5 (60ms .. 600ms, jittered in its
		// upper half): about 135 attempts (270 calls) a minute; spinning
		// reaches the test store's 10,000 calls within milliseconds.
		if n := st.calls.Load(); n > 500 {
			t.Errorf("a Contender made %d store calls in a minute on grants shorter than the margin: it spins", n)
		}
	})
}

// shortOnce is a store with a known grant limit that fits the safety
// margin, whose first grant still comes back shorter than the margin: what
// surely remains of a ZooKeeper session can dip that low for a moment
// under load, though the session timeout leaves room.
type shortOnce struct {
	*memstore.Store
	limit time.Duration
	short atomic.Bool
}

func (s *shortOnce) MaxGrant() time.Duration { return s.limit }

func (s *shortOnce) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if s.short.CompareAndSwap(false, true) {
		return s.Store.Acquire(ctx, name, contender, min(ttl, 100*time.Millisecond), 0)
	}
	return s.Store.Acquire(ctx, name, contender, ttl, transition)
}

// TestTransientShortGrantIsRetried: a grant limiter whose limit leaves room
// after the safety margin once grants less than the margin. That is a
// moment, not the configuration: Acquire gives the grant back and tries
// again after a back-off, instead of failing with ErrGrantTooShort
// (zkstore's TestNegotiatedTimeout failed so under load).
func TestTransientShortGrantIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &shortOnce{Store: memstore.New(), limit: 16 * time.Second}
		m := newMgr(t, st, "a")
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		l, err := m.Acquire(ctx, "job")
		if err != nil {
			t.Fatalf("Acquire after one short grant of a store whose limit fits the margin: %v, want the lease", err)
		}
		if err := l.Release(bg); err != nil {
			t.Error(err)
		}
	})
}
