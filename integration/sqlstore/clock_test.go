package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// reading is one store call with the client's clock around it.
type reading struct {
	what       string
	sent, recv time.Time
	rec        lease.Record
}

// readClock makes one call and keeps when it was sent and answered.
func readClock(t *testing.T, what string, f func() (lease.Record, error)) reading {
	t.Helper()
	sent := time.Now()
	rec, err := f()
	recv := time.Now()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return reading{what, sent, recv, rec}
}

// checkFollows fails unless every reading reports the server's clock and
// it advanced, between each two calls, as the client's clock allows
// (milliseconds, truncated: 2 ms either way).
func checkFollows(t *testing.T, rs []reading) {
	t.Helper()
	const round = 2 * time.Millisecond
	for i, r := range rs {
		if r.rec.ServerTime.IsZero() {
			t.Errorf("%s reports no server time", r.what)
			continue
		}
		if d := r.rec.ServerTime.Sub(r.sent); d < -time.Minute || d > time.Minute {
			t.Errorf("%s: server time %v is %v from this host's clock; the server runs on this host", r.what, r.rec.ServerTime, d)
		}
		if i == 0 || rs[i-1].rec.ServerTime.IsZero() {
			continue
		}
		p := rs[i-1]
		served := r.rec.ServerTime.Sub(p.rec.ServerTime)
		if lo, hi := r.sent.Sub(p.recv)-round, r.recv.Sub(p.sent)+round; served < lo || served > hi {
			t.Errorf("server time advanced %v from %s to %s; this host's clock allows %v to %v", served, p.what, r.what, lo, hi)
		}
	}
}

// TestServerTimeFollowsRealTime (issue 15): every record of a held lock
// reports the server's clock at the statement (now_ms), and it advances
// with real time, as the lease's clock step detector assumes.
func TestServerTimeFollowsRealTime(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		s := d.newStore(t, d.migrated(t))
		const mx = "clock/follows"
		var rs []reading
		rs = append(rs, readClock(t, "Acquire", func() (lease.Record, error) { return s.Acquire(ctx, mx, "a", ttl, tr) }))
		tok := rs[0].rec.Token
		for i := 0; i < 3; i++ {
			time.Sleep(30 * time.Millisecond)
			rs = append(rs, readClock(t, "Renew", func() (lease.Record, error) { return s.Renew(ctx, mx, "a", tok, ttl, tr) }))
			rs = append(rs, readClock(t, "Get", func() (lease.Record, error) { return s.Get(ctx, mx) }))
			rs = append(rs, readClock(t, "RenewMany", func() (lease.Record, error) {
				res, err := s.RenewMany(ctx, []lease.RenewRequest{{Name: mx, Contender: "a", Token: tok, TTL: ttl, Transition: tr}})
				if err != nil {
					return lease.Record{}, err
				}
				return res[0].Record, res[0].Err
			}))
		}
		checkFollows(t, rs)
	})
}

// TestSQLiteClockOffset (issue 15): WithSQLiteClockOffset steps the
// clock SQLite's statements read: a grant written before a forward step
// of ttl + transition has ended after it, and the records report the
// stepped clock. The server dialects refuse the option.
func TestSQLiteClockOffset(t *testing.T) {
	ctx := t.Context()
	var offset atomic.Int64
	clock := func() time.Duration { return time.Duration(offset.Load()) }
	s := sqlite.newStore(t, sqlite.migrated(t), sqlstore.WithSQLiteClockOffset(clock))
	const mx = "clock/stepped"
	a := readClock(t, "Acquire", func() (lease.Record, error) { return s.Acquire(ctx, mx, "a", ttl, tr) })
	if a.rec.OwnerID != "a" {
		t.Fatalf("Acquire = %+v", a.rec)
	}
	step := ttl + tr
	offset.Store(int64(step))
	g := readClock(t, "Get", func() (lease.Record, error) { return s.Get(ctx, mx) })
	if g.rec.OwnerID != "" {
		t.Errorf("Get after a forward step of %v = %+v, want the grant ended", step, g.rec)
	}
	served := g.rec.ServerTime.Sub(a.rec.ServerTime)
	if lo, hi := step+g.sent.Sub(a.recv)-2*time.Millisecond, step+g.recv.Sub(a.sent)+2*time.Millisecond; served < lo || served > hi {
		t.Errorf("server time advanced %v across a step of %v, want %v to %v", served, step, lo, hi)
	}
	if _, err := s.Renew(ctx, mx, "a", a.rec.Token, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew after the step: %v, want ErrNotHeld", err)
	}
	unreachable := map[string]string{"postgres": "postgres://127.0.0.1:1/none", "pglisten": "postgres://127.0.0.1:1/none", "mysql": "none@tcp(127.0.0.1:1)/none"}
	for _, d := range servers {
		db, err := sql.Open(d.driver, unreachable[d.name])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.store(db, sqlstore.WithSQLiteClockOffset(clock)); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("New %s with WithSQLiteClockOffset: %v, want ErrInvalidArgument", d.name, err)
		}
		db.Close()
	}
}

// stepLog collects the clock_step records of a Manager.
type stepLog struct {
	mu    sync.Mutex
	steps []string
}

func (h *stepLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *stepLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *stepLog) WithGroup(string) slog.Handler            { return h }
func (h *stepLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == lease.LogKeyEvent && a.Value.String() == lease.EventClockStep {
			h.mu.Lock()
			h.steps = append(h.steps, r.Message)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *stepLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.steps)
}

// TestSQLiteClockStepDetected (issue 15): a Manager holding two leases on
// SQLite sees a forward step of its clock (an hour: every grant ends at
// once) from the next renewal's reply, logs it, and both leases end long
// before their deadlines.
func TestSQLiteClockStepDetected(t *testing.T) {
	var offset atomic.Int64
	s := sqlite.newStore(t, sqlite.migrated(t), sqlstore.WithSQLiteClockOffset(func() time.Duration { return time.Duration(offset.Load()) }))
	h := &stepLog{}
	const lttl, ltr = 6 * time.Second, 3 * time.Second
	m, err := lease.NewManager(s, lease.WithTTL(lttl), lease.WithTransition(ltr), lease.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	x, err := m.Acquire(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	y, err := m.Acquire(t.Context(), "y")
	if err != nil {
		t.Fatal(err)
	}
	stepped := time.Now()
	offset.Store(int64(time.Hour))
	for _, l := range []*lease.Lease{x, y} {
		select {
		case <-l.Done():
		case <-time.After(time.Minute):
			t.Fatalf("%s still held a minute after its grant ended on the store", l.Name())
		}
	}
	// Both end at the first renewal after the step (about lttl/3), well
	// before the deadline of the later one's last confirmation.
	if took := time.Since(stepped); took >= lttl+ltr {
		t.Errorf("leases ended %v after the step, want within a renewal period (%v)", took, lttl/3)
	}
	// The record follows the reply that showed the step; other leases may
	// end first.
	for deadline := time.Now().Add(10 * time.Second); h.count() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := h.count(); n != 1 {
		t.Errorf("%d clock_step records, want 1", n)
	}
}
