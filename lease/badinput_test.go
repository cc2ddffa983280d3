package lease_test

// Bad input never panics: every unusable argument gives an error that wraps
// exactly one of the package's sentinels (ErrInvalidName, ErrInvalidArgument
// or ErrClosed), and nothing is left running. Valid edge cases (longest
// names, unicode, punctuation) work end to end on memstore.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// badInputSentinels are the errors of package lease; every error wraps at
// most one of them.
var badInputSentinels = []error{
	lease.ErrNotAcquired, lease.ErrNotHeld, lease.ErrLost, lease.ErrReleased,
	lease.ErrClosed, lease.ErrInvalidName, lease.ErrInvalidArgument, lease.ErrGrantTooShort, lease.ErrStoreSetup,
}

// Timings long enough that no lease of these real-time tests is lost on a
// loaded machine; nothing in them waits for a lease to lapse.
const (
	badInputTTL        = 10 * time.Second
	badInputTransition = 5 * time.Second
)

// badInputOpts returns the short timings plus opts.
func badInputOpts(opts ...lease.Option) []lease.Option {
	return append([]lease.Option{lease.WithTTL(badInputTTL), lease.WithTransition(badInputTransition)}, opts...)
}

// newBadInputManager returns a Manager on st that is closed when the test
// ends.
func newBadInputManager(t *testing.T, st lease.Store, opts ...lease.Option) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(st, badInputOpts(opts...)...)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// badInputNoPanic runs f and turns a panic into a description.
func badInputNoPanic(f func() error) (panicked string, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Sprint(p)
		}
	}()
	return "", f()
}

// badInputWantOnly fails unless err wraps want and no other sentinel of the package.
func badInputWantOnly(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v (%T), want one wrapping %v", what, err, err, want)
	}
	for _, s := range badInputSentinels {
		if s != want && errors.Is(err, s) {
			t.Fatalf("%s: error %v wraps both %v and %v", what, err, want, s)
		}
	}
}

// badInputCheck runs call and checks that it returned an error wrapping
// want, and no other sentinel, without panicking.
func badInputCheck(t *testing.T, call func() error, want error) {
	t.Helper()
	p, err := badInputNoPanic(call)
	if p != "" {
		t.Fatalf("panicked: %s; want an error wrapping %v", p, want)
	}
	badInputWantOnly(t, "result", err, want)
}

func TestNewManagerRejectsBadInput(t *testing.T) {
	st := memstore.New()
	tests := []struct {
		name  string
		store lease.Store
		opts  []lease.Option
	}{
		{"nil store", nil, nil},
		{"nil store with valid options", nil, badInputOpts()},
		{"WithTTL(0)", st, []lease.Option{lease.WithTTL(0)}},
		{"WithTTL(-1)", st, []lease.Option{lease.WithTTL(-1)}},
		{"WithTTL(1µs)", st, []lease.Option{lease.WithTTL(time.Microsecond)}},
		{"WithTTL(1ms-1ns)", st, []lease.Option{lease.WithTTL(time.Millisecond - 1)}},
		{"WithTTL(1µs) with a call timeout that fits it", st,
			[]lease.Option{lease.WithTTL(time.Microsecond), lease.WithCallTimeout(time.Nanosecond)}},
		{"WithTransition(-1)", st, []lease.Option{lease.WithTransition(-1)}},
		{"WithTransition(-1h)", st, []lease.Option{lease.WithTransition(-time.Hour)}},
		{"WithSafetyMargin(0)", st, []lease.Option{lease.WithSafetyMargin(0)}},
		{"WithSafetyMargin(-1)", st, []lease.Option{lease.WithSafetyMargin(-1)}},
		{"safety margin 1ns over half of ttl+transition", st,
			badInputOpts(lease.WithSafetyMargin((badInputTTL+badInputTransition)/2 + 1))},
		{"safety margin over half of the default ttl+transition", st,
			[]lease.Option{lease.WithSafetyMargin((lease.DefaultTTL+lease.DefaultTransition)/2 + 1)}},
		{"safety margin larger than ttl+transition", st,
			badInputOpts(lease.WithSafetyMargin(time.Hour))},
		{"safety margin checked against a ttl given after it", st,
			[]lease.Option{lease.WithSafetyMargin(time.Second), lease.WithTTL(time.Second), lease.WithTransition(0)}},
		{"WithCallTimeout(0)", st, []lease.Option{lease.WithCallTimeout(0)}},
		{"WithCallTimeout(-1)", st, []lease.Option{lease.WithCallTimeout(-1)}},
		{"call timeout 1ns over ttl", st, badInputOpts(lease.WithCallTimeout(badInputTTL + 1))},
		{"call timeout over the default ttl", st, []lease.Option{lease.WithCallTimeout(lease.DefaultTTL + time.Second)}},
		{"call timeout checked against a ttl given after it", st,
			[]lease.Option{lease.WithCallTimeout(2 * time.Second), lease.WithTTL(time.Second)}},
		{`WithContenderID("")`, st, []lease.Option{lease.WithContenderID("")}},
		{"WithContenderID of 129 bytes", st, []lease.Option{lease.WithContenderID(strings.Repeat("x", lease.MaxContenderIDLength+1))}},
		{"WithContenderID of 129 bytes ending in a multibyte rune", st,
			[]lease.Option{lease.WithContenderID(strings.Repeat("x", lease.MaxContenderIDLength-1) + "é")}},
		{"WithContenderID of invalid UTF-8", st, []lease.Option{lease.WithContenderID("node-\xff")}},
		{"WithContenderID of a truncated rune", st, []lease.Option{lease.WithContenderID("訂"[:2])}},
		{"WithContenderID with NUL", st, []lease.Option{lease.WithContenderID("node\x00-1")}},
		{"WithContenderID of a lone NUL", st, []lease.Option{lease.WithContenderID("\x00")}},
		{"WithLogger(nil)", st, []lease.Option{lease.WithLogger(nil)}},
		{"WithClock(nil)", st, []lease.Option{lease.WithClock(nil)}},
		{"nil Option", st, []lease.Option{nil}},
		{"nil Option after valid ones", st, badInputOpts(nil)},
		{"bad option after valid ones", st, badInputOpts(lease.WithContenderID("ok"), lease.WithTTL(0))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *lease.Manager
			badInputCheck(t, func() (err error) {
				m, err = lease.NewManager(tt.store, tt.opts...)
				return err
			}, lease.ErrInvalidArgument)
			if m != nil {
				t.Fatalf("NewManager returned a Manager along with its error")
			}
		})
	}
}

// badInputClock is a valid Clock on the time package.
type badInputClock struct{}

type badInputTimer struct{ t *time.Timer }

func (badInputClock) Now() time.Time                       { return time.Now() }
func (badInputClock) NewTimer(d time.Duration) lease.Timer { return badInputTimer{time.NewTimer(d)} }
func (t badInputTimer) C() <-chan time.Time                { return t.t.C }
func (t badInputTimer) Stop() bool                         { return t.t.Stop() }

func TestNewManagerAcceptsEdgeValues(t *testing.T) {
	maxID := strings.Repeat("x", lease.MaxContenderIDLength)
	maxUnicodeID := strings.Repeat("節", lease.MaxContenderIDLength/3) + "xy" // 126 + 2 bytes
	tests := []struct {
		name   string
		opts   []lease.Option
		wantID string // "" when not set
		use    bool   // also acquire and release a lock with it
	}{
		{"no options", nil, "", true},
		{"WithTTL(1ms)", []lease.Option{lease.WithTTL(time.Millisecond)}, "", false},
		{"WithTTL(1ms) and no transition", []lease.Option{lease.WithTTL(time.Millisecond), lease.WithTransition(0)}, "", false},
		{"WithTransition(0)", []lease.Option{lease.WithTransition(0)}, "", true},
		{"safety margin exactly half of ttl+transition", badInputOpts(lease.WithSafetyMargin((badInputTTL + badInputTransition) / 2)), "", true},
		{"safety margin 1ns", badInputOpts(lease.WithSafetyMargin(1)), "", true},
		{"call timeout exactly ttl", badInputOpts(lease.WithCallTimeout(badInputTTL)), "", true},
		{"call timeout 1ns", badInputOpts(lease.WithCallTimeout(1)), "", false},
		{"contender id of 128 bytes", []lease.Option{lease.WithContenderID(maxID)}, maxID, true},
		{"contender id of 128 bytes of unicode", []lease.Option{lease.WithContenderID(maxUnicodeID)}, maxUnicodeID, true},
		{"contender id with punctuation and emoji", []lease.Option{lease.WithContenderID("host:42/{a b}🚀")}, "host:42/{a b}🚀", true},
		{"later contender id wins", []lease.Option{lease.WithContenderID("first"), lease.WithContenderID("second")}, "second", true},
		{"WithLogger", []lease.Option{lease.WithLogger(slog.New(slog.DiscardHandler))}, "", true},
		{"WithClock", []lease.Option{lease.WithClock(badInputClock{})}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := lease.NewManager(memstore.New(), tt.opts...)
			if err != nil {
				t.Fatalf("NewManager: %v", err)
			}
			defer m.Close(context.Background())
			if tt.wantID != "" && m.ID() != tt.wantID {
				t.Fatalf("ID() = %q, want %q", m.ID(), tt.wantID)
			}
			// A default id must itself be a valid contender id.
			same, err := lease.NewManager(memstore.New(), lease.WithContenderID(m.ID()))
			if err != nil {
				t.Fatalf("ID() %q is not a valid contender id: %v", m.ID(), err)
			}
			_ = same.Close(context.Background())
			if !tt.use {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := m.Acquire(ctx, "edge")
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
}

// badInputNames are names every call must refuse with ErrInvalidName.
var badInputNames = []struct{ what, name string }{
	{"empty", ""},
	{"256 bytes", strings.Repeat("x", lease.MaxNameLength+1)},
	{"256 bytes of 3-byte runes plus one", strings.Repeat("訂", lease.MaxNameLength/3) + "x"},
	{"1000 bytes", strings.Repeat("n", 1000)},
	{"invalid UTF-8", "\xff"},
	{"invalid UTF-8 inside", "orders/\xfe/42"},
	{"truncated rune", "訂"[:2]},
	{"UTF-16 surrogate half", "\xed\xa0\x80"},
	{"overlong encoding", "\xc0\xaf"},
	{"NUL inside", "a\x00b"},
	{"lone NUL", "\x00"},
	{"NUL at the end of 255 bytes", strings.Repeat("x", lease.MaxNameLength-1) + "\x00"},
}

func TestBadNamesAreRefused(t *testing.T) {
	m := newBadInputManager(t, memstore.New())
	ctx := context.Background()
	onAcquired := func(context.Context, *lease.Lease) {}
	noWork := func(context.Context) error { return nil }
	ops := []struct {
		op   string
		call func(name string) error
	}{
		{"ValidateName", lease.ValidateName},
		{"Acquire", func(name string) error {
			l, err := m.Acquire(ctx, name)
			return badInputResult(l != nil, err)
		}},
		{"TryAcquire", func(name string) error {
			l, err := m.TryAcquire(ctx, name)
			return badInputResult(l != nil, err)
		}},
		{"Get", func(name string) error {
			o, err := m.Get(ctx, name)
			return badInputResult(o != (lease.Owner{}), err)
		}},
		{"Watch", func(name string) error {
			ch, err := m.Watch(ctx, name)
			return badInputResult(ch != nil, err)
		}},
		{"Contend", func(name string) error {
			c, err := m.Contend(name, lease.Callbacks{OnAcquired: onAcquired})
			return badInputResult(c != nil, err)
		}},
		{"Schedule", func(name string) error {
			s, err := lease.Schedule(m, name, lease.FixedDelay(time.Second), noWork)
			return badInputResult(s != nil, err)
		}},
	}
	for _, bn := range badInputNames {
		for _, op := range ops {
			t.Run(op.op+"/"+bn.what, func(t *testing.T) {
				badInputCheck(t, func() error { return op.call(bn.name) }, lease.ErrInvalidName)
			})
		}
	}
}

// badInputResult turns "a result came back along with an error" into an
// error of its own (wrapping no sentinel), so that rows check both at once.
func badInputResult(gotResult bool, err error) error {
	if gotResult && err != nil {
		return fmt.Errorf("a non-zero result along with error %v", err)
	}
	if gotResult {
		return errors.New("a result and no error")
	}
	return err
}

func TestBadArgumentsAreRefused(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context // a nil context, without a literal nil that vet would flag
	st := memstore.New()
	m := newBadInputManager(t, st, lease.WithContenderID("m"))
	noWork := func(context.Context) error { return nil }

	tests := []struct {
		name string
		call func(t *testing.T) error
	}{
		{"Acquire with a nil context", func(*testing.T) error {
			l, err := m.Acquire(nilCtx, "x")
			return badInputResult(l != nil, err)
		}},
		{"TryAcquire with a nil context", func(*testing.T) error {
			l, err := m.TryAcquire(nilCtx, "x")
			return badInputResult(l != nil, err)
		}},
		{"Watch with a nil context", func(*testing.T) error {
			ch, err := m.Watch(nilCtx, "x")
			return badInputResult(ch != nil, err)
		}},
		{"Get with a nil context", func(*testing.T) error {
			o, err := m.Get(nilCtx, "x")
			return badInputResult(o != (lease.Owner{}), err)
		}},
		{"Lease.Release with a nil context", func(t *testing.T) error {
			l, err := m.Acquire(ctx, "release-nil-ctx")
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			t.Cleanup(func() { _ = l.Release(ctx) })
			return l.Release(nilCtx)
		}},
		{"Contender.Stop with a nil context", func(t *testing.T) error {
			c := badInputWaitingContender(t, st, m, "stop-nil-ctx")
			return c.Stop(nilCtx)
		}},
		{"Manager.Close with a nil context", func(t *testing.T) error {
			m2, err := lease.NewManager(st, badInputOpts()...)
			if err != nil {
				t.Fatalf("NewManager: %v", err)
			}
			t.Cleanup(func() { _ = m2.Close(ctx) })
			return m2.Close(nilCtx)
		}},
		{"Contend with nil OnAcquired", func(*testing.T) error {
			c, err := m.Contend("x", lease.Callbacks{})
			return badInputResult(c != nil, err)
		}},
		{"Contend with only OnReleased and OnOwner", func(*testing.T) error {
			c, err := m.Contend("x", lease.Callbacks{OnReleased: func(lease.Owner) {}, OnOwner: func(lease.Owner) {}})
			return badInputResult(c != nil, err)
		}},
		{"Schedule with a nil manager", func(*testing.T) error {
			s, err := lease.Schedule(nil, "x", lease.FixedDelay(time.Second), noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with nil work", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedDelay(time.Second), nil)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with FixedRate(0)", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedRate(0), noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with FixedRate(-1)", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedRate(-1), noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with FixedDelay(0)", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedDelay(0), noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with FixedDelay(-1)", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedDelay(-1), noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with a zero Trigger", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.Trigger{}, noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with a negative initial delay", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedDelay(time.Second).WithInitialDelay(-1), noWork)
			return badInputResult(s != nil, err)
		}},
		{"Schedule with FixedRate and a negative initial delay", func(*testing.T) error {
			s, err := lease.Schedule(m, "x", lease.FixedRate(time.Second).WithInitialDelay(-time.Hour), noWork)
			return badInputResult(s != nil, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			badInputCheck(t, func() error { return tt.call(t) }, lease.ErrInvalidArgument)
		})
	}
}

// badInputWaitingContender returns a Contender of m for name that is
// contending, not leading: another Manager holds name until the test ends.
// Its Stop is called at cleanup.
func badInputWaitingContender(t *testing.T, st lease.Store, m *lease.Manager, name string) *lease.Contender {
	t.Helper()
	ctx := context.Background()
	other := newBadInputManager(t, st, lease.WithContenderID("holder-of-"+name))
	l, err := other.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { _ = l.Release(ctx) })
	c, err := m.Contend(name, lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) {}})
	if err != nil {
		t.Fatalf("Contend: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}

func TestCallsAfterCloseFail(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	m, err := lease.NewManager(st, badInputOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	// Use it first, so that Close has something to end.
	l, err := m.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l.Held() {
		t.Fatalf("lease still held after Close")
	}
	tests := []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error {
			l, err := m.Acquire(ctx, "x")
			return badInputResult(l != nil, err)
		}},
		{"Acquire of the name it held", func() error {
			l, err := m.Acquire(ctx, "held")
			return badInputResult(l != nil, err)
		}},
		{"TryAcquire", func() error {
			l, err := m.TryAcquire(ctx, "x")
			return badInputResult(l != nil, err)
		}},
		{"Contend", func() error {
			c, err := m.Contend("x", lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) {}})
			return badInputResult(c != nil, err)
		}},
		{"Watch", func() error {
			ch, err := m.Watch(ctx, "x")
			return badInputResult(ch != nil, err)
		}},
		{"Schedule", func() error {
			s, err := lease.Schedule(m, "x", lease.FixedRate(time.Second), func(context.Context) error { return nil })
			return badInputResult(s != nil, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			badInputCheck(t, tt.call, lease.ErrClosed)
		})
	}
	t.Run("Close again", func(t *testing.T) {
		if err := m.Close(ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
	t.Run("Release after Close", func(t *testing.T) {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release after Close: %v", err)
		}
		if !errors.Is(l.Err(), lease.ErrReleased) {
			t.Fatalf("Err() = %v, want ErrReleased", l.Err())
		}
	})
}

func TestCloseFailsWaitingAcquire(t *testing.T) {
	synctest.Test(t, testCloseFailsWaitingAcquire)
}

func testCloseFailsWaitingAcquire(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	holder := newBadInputManager(t, st, lease.WithContenderID("holder"))
	l, err := holder.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	m, err := lease.NewManager(st, badInputOpts(lease.WithContenderID("waiter"))...)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := m.Acquire(ctx, "x")
		got <- badInputResult(l != nil, err)
	}()
	// Close once the waiter is queued on the store.
	synctest.Wait()
	if q := st.Inspect("x").Queue; len(q) != 1 || q[0] != "waiter" {
		t.Fatalf("waiter not queued: %+v", st.Inspect("x"))
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	synctest.Wait()
	select {
	case err := <-got:
		badInputWantOnly(t, "Acquire waiting when Close was called", err, lease.ErrClosed)
	default:
		t.Fatal("Acquire still blocked after Close returned")
	}
}

func TestEndingTwiceIsFine(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	tests := []struct {
		name string
		// run ends something twice and returns both results.
		run func(t *testing.T, m *lease.Manager) (first, second error)
	}{
		{"Lease.Release twice", func(t *testing.T, m *lease.Manager) (error, error) {
			l, err := m.Acquire(ctx, "release-twice")
			if err != nil {
				t.Fatal(err)
			}
			first := l.Release(ctx)
			return first, l.Release(ctx)
		}},
		{"Lease.Release twice concurrently", func(t *testing.T, m *lease.Manager) (error, error) {
			l, err := m.Acquire(ctx, "release-twice-concurrently")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var first error
			wg.Go(func() { first = l.Release(ctx) })
			second := l.Release(ctx)
			wg.Wait()
			return first, second
		}},
		{"Contender.Stop twice while leading", func(t *testing.T, m *lease.Manager) (error, error) {
			leading := make(chan struct{})
			c, err := m.Contend("stop-twice", lease.Callbacks{OnAcquired: func(ctx context.Context, _ *lease.Lease) {
				close(leading)
				<-ctx.Done()
			}})
			if err != nil {
				t.Fatal(err)
			}
			<-leading
			first := c.Stop(ctx)
			return first, c.Stop(ctx)
		}},
		{"Contender.Stop twice while waiting", func(t *testing.T, m *lease.Manager) (error, error) {
			c := badInputWaitingContender(t, st, m, "stop-twice-waiting")
			first := c.Stop(ctx)
			return first, c.Stop(ctx)
		}},
		{"Scheduler.Stop twice", func(t *testing.T, m *lease.Manager) (error, error) {
			ran := make(chan struct{}, 1)
			s, err := lease.Schedule(m, "schedule-stop-twice", lease.FixedDelay(time.Millisecond), func(context.Context) error {
				select {
				case ran <- struct{}{}:
				default:
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			<-ran
			first := s.Stop(ctx)
			second := s.Stop(ctx)
			if s.Running() {
				t.Errorf("Running() after Stop")
			}
			return first, second
		}},
		{"Manager.Close twice", func(t *testing.T, _ *lease.Manager) (error, error) {
			m, err := lease.NewManager(st, badInputOpts()...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Acquire(ctx, "close-twice"); err != nil {
				t.Fatal(err)
			}
			first := m.Close(ctx)
			return first, m.Close(ctx)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newBadInputManager(t, st)
			first, second := tt.run(t, m)
			if first != nil {
				t.Errorf("first call: %v, want nil", first)
			}
			if second != nil {
				t.Errorf("second call: %v, want nil", second)
			}
		})
	}
}

// badInputGoodNames are valid names that must work end to end.
var badInputGoodNames = []struct{ what, name string }{
	{"one byte", "a"},
	{"255 bytes", strings.Repeat("x", lease.MaxNameLength)},
	{"255 bytes of 3-byte runes", strings.Repeat("訂", lease.MaxNameLength/3)},
	{"255 bytes of 4-byte runes and ASCII", strings.Repeat("🚀", lease.MaxNameLength/4) + "abc"},
	{"braces", "{orders}"},
	{"hash tag and colon", "{tenant:7}:jobs"},
	{"slashes", "/orders/42/"},
	{"colons", "a:b::c"},
	{"spaces", " orders 42 "},
	{"a lone space", " "},
	{"tab and newline", "a\tb\nc"},
	{"CJK", "訂單/四十二"},
	{"emoji", "🚀"},
	{"emoji with ZWJ and modifiers", "👩🏽‍🚀 launch"},
	{"percent and quotes", `50% "off" 'now'`},
	{"backslash and star", `a\*?[b]`},
	{"DEL and control bytes", "\x01\x1f\x7f"},
	{"U+FFFD", "\ufffd"},
	{"max code point", "\U0010ffff"},
}

func TestValidNamesWork(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	a := newBadInputManager(t, st, lease.WithContenderID("alpha"))
	b := newBadInputManager(t, st, lease.WithContenderID("beta"))
	// Hold all of them at once: different names are different locks,
	// each granted its first token.
	held := make([]*lease.Lease, len(badInputGoodNames))
	for i, gn := range badInputGoodNames {
		if err := lease.ValidateName(gn.name); err != nil {
			t.Fatalf("ValidateName(%s): %v", gn.what, err)
		}
		l, err := a.Acquire(ctx, gn.name)
		if err != nil {
			t.Fatalf("Acquire(%s): %v", gn.what, err)
		}
		if l.Name() != gn.name || l.Token() != 1 {
			t.Fatalf("Acquire(%s) = name %q token %d, want the same name and token 1", gn.what, l.Name(), l.Token())
		}
		held[i] = l
	}
	for i, gn := range badInputGoodNames {
		t.Run(gn.what, func(t *testing.T) {
			if _, err := b.TryAcquire(ctx, gn.name); !errors.Is(err, lease.ErrNotAcquired) {
				t.Fatalf("TryAcquire by another Manager: %v, want ErrNotAcquired", err)
			}
			o, err := b.Get(ctx, gn.name)
			if err != nil || o.Name != gn.name || o.ID != "alpha" || o.Token != 1 {
				t.Fatalf("Get = %+v, %v; want alpha with token 1", o, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			ch, err := b.Watch(wctx, gn.name)
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			if o := <-ch; o.Name != gn.name || o.ID != "alpha" {
				t.Fatalf("Watch sent %+v first, want alpha", o)
			}
			cancel()
			for range ch {
			}
			if err := held[i].Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			l, err := b.Acquire(ctx, gn.name)
			if err != nil {
				t.Fatalf("Acquire by beta after the release: %v", err)
			}
			if l.Token() != 2 {
				t.Fatalf("beta's token = %d, want 2", l.Token())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release by beta: %v", err)
			}
			if o, err := a.Get(ctx, gn.name); err != nil || !o.Free() {
				t.Fatalf("Get after both released = %+v, %v; want free", o, err)
			}
		})
	}
	// No two names were confused by the store.
	if got := len(st.Mutexes()); got != len(badInputGoodNames) {
		t.Fatalf("store knows %d locks, want %d", got, len(badInputGoodNames))
	}
}

func TestValidNamesContendAndSchedule(t *testing.T) {
	ctx := context.Background()
	m := newBadInputManager(t, memstore.New())
	for _, gn := range badInputGoodNames {
		t.Run(gn.what, func(t *testing.T) {
			ran := make(chan struct{}, 1)
			s, err := lease.Schedule(m, gn.name, lease.FixedDelay(time.Hour), func(context.Context) error {
				ran <- struct{}{}
				return nil
			})
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			<-ran
			if err := s.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
		})
	}
}

// TestTryAcquireRightAfterRelease: once Release has returned nil, the
// lock is free and nothing of this Manager holds or awaits it, so a
// TryAcquire of the same name through the same Manager must succeed at once,
// every time.
func TestTryAcquireRightAfterRelease(t *testing.T) {
	ctx := context.Background()
	m := newBadInputManager(t, memstore.New())
	for i := 0; i < 1000; i++ {
		l, err := m.TryAcquire(ctx, "again")
		if err != nil {
			t.Fatalf("round %d: TryAcquire right after Release: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
	}
}
