package tck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/lease"
)

// Harness describes the store under test. Only Open is required.
type Harness struct {
	// Open is called once at the start of every case, with the case's t
	// (inside the case's synctest bubble when Synctest is set), and returns
	// the store under test as that case sees it. Use t.Cleanup to release
	// what Open or the Backend's functions create, and t.Fatal to report a
	// store that cannot be reached. Required.
	Open func(t *testing.T) Backend

	// TTL and Transition are the lease timings every Manager of the suite
	// uses (lease.WithTTL, lease.WithTransition). Zero means the default:
	// 1 s and 500 ms. Real servers make the suite take several ttl per
	// case; raise them for a slow store or machine. The cases check that a
	// grant runs as asked while nothing fails: a store that ends grants at
	// its MaxGrant ([lease.GrantLimiter]) needs TTL + Transition within it.
	TTL, Transition time.Duration

	// MultiContend is how long ten Managers contend in the multiContend
	// case. Zero means Simba's 30 s, or 3 s under testing.Short().
	MultiContend time.Duration

	// Options are added to every Manager after the timings, for example
	// lease.WithCallTimeout for a slow store or lease.WithLogger.
	Options []lease.Option

	// Synctest runs every case inside a testing/synctest bubble, where time
	// is fake and advances instantly once every goroutine waits. Only for
	// in-process stores whose every goroutine and timer lives in the
	// bubble (memstore); never with a network client.
	Synctest bool

	// Serial runs the cases one after another instead of in parallel, for
	// a server with few connections to spare.
	Serial bool

	// Fair says that the store keeps a fair wait queue: a Release hands
	// the lock to the contender that has waited longest (by its first
	// losing Acquire) before any later one. The FairHandoff case, and the
	// order checks of ReleaseWakesWaiter, run only for such a store.
	Fair bool

	// LeakOptions are added to the goleak check of the NoGoroutineLeak case,
	// for goroutines a store client starts by itself on first use (the
	// case already ignores every goroutine that exists after each client
	// made one Get call).
	LeakOptions []goleak.Option
}

// Backend is the store under test as one case sees it. All clients it
// returns see the same locks.
type Backend struct {
	// Client returns a client of the store: a new one, with its own
	// connection where the backend has connections, on every call. An
	// in-process store may return the same instance every time. Every
	// Manager of a case gets its own client. Required.
	Client func() lease.Store

	// Partitioned returns a new client whose traffic can be cut, as a
	// black-holing proxy does: while cut, its calls hang without a reply
	// (the request may or may not reach the server) and resume when
	// healed. Optional; the cases that need it are skipped without it.
	// In-process stores can wrap a client with [Cuttable].
	Partitioned func() (lease.Store, Partition)
}

// Partition cuts and heals the traffic of one client (see
// [Backend.Partitioned]).
type Partition interface {
	// Cut makes the client's calls hang without a reply until Heal. A
	// call in flight may complete or hang.
	Cut()
	// Heal lets calls through again; hung calls go on. Healing a healed
	// partition does nothing.
	Heal()
}

// Run runs every case of the suite against the store h describes, each as
// a subtest of t (TestTCK/Start, TestTCK/Guard, ...). Select some with
// go test -run 'TestTCK/(Start|Guard)'.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("tck: Harness.Open is nil")
	}
	h = h.withDefaults()
	if err := h.validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.alone && !h.Serial {
				t.Parallel()
			}
			if h.Synctest {
				synctest.Test(t, func(t *testing.T) { runCase(t, h, c) })
				return
			}
			runCase(t, h, c)
		})
	}
}

// tcase is one case of the suite.
type tcase struct {
	name  string
	run   func(e *env)
	alone bool // never in parallel with other cases
}

// cases lists the suite in the order it runs.
var cases = []tcase{
	// Simba's TCK (cases_simba.go, cases_schedule.go).
	{name: "Start", run: caseStart},
	{name: "Restart", run: caseRestart},
	{name: "Guard", run: caseGuard},
	{name: "MultiContend", run: caseMultiContend},
	{name: "Schedule", run: caseSchedule},
	// Acquiring and waiting (cases_acquire.go, cases_fair.go).
	{name: "TryAcquire", run: caseTryAcquire},
	{name: "CancelWhileWaiting", run: caseCancelWhileWaiting},
	{name: "TokensIncrease", run: caseTokensIncrease},
	{name: "ReleaseWakesWaiter", run: caseReleaseWakesWaiter},
	{name: "FairHandoff", run: caseFairHandoff},
	{name: "Watch", run: caseWatch},
	// The Store contract through raw calls (cases_transition.go,
	// cases_faults.go, cases_clock.go).
	{name: "Transition", run: caseTransition},
	{name: "TakeoverAfterAbandon", run: caseTakeoverAfterAbandon},
	{name: "StaleRenewRelease", run: caseStaleRenewRelease},
	{name: "ServerClock", run: caseServerClock},
	// Faults and lifecycle (cases_slow.go, cases_partition.go,
	// cases_lifecycle.go).
	{name: "SlowStore", run: caseSlowStore},
	{name: "RevokedLease", run: caseRevokedLease},
	{name: "RevokedLeader", run: caseRevokedLeader},
	{name: "PartitionedHolder", run: casePartitionedHolder},
	{name: "PartitionedHolderRenewed", run: casePartitionedHolderRenewed},
	{name: "PartitionedLeader", run: casePartitionedLeader},
	{name: "PartitionedLeaderRenewed", run: casePartitionedLeaderRenewed},
	{name: "CloseReleases", run: caseCloseReleases},
	{name: "NoGoroutineLeak", run: caseNoGoroutineLeak, alone: true},
	// Names and contender ids (cases_names.go, cases_ids.go).
	{name: "OddNames", run: caseOddNames},
	{name: "OddIDs", run: caseOddIDs},
	{name: "InvalidNames", run: caseInvalidNames},
	// Listing, for a store that is a lease.Lister (cases_list.go).
	{name: "List", run: caseList},
}

func (h Harness) withDefaults() Harness {
	if h.TTL == 0 {
		h.TTL = time.Second
	}
	if h.Transition == 0 {
		h.Transition = h.TTL / 2
	}
	if h.MultiContend == 0 {
		h.MultiContend = 30 * time.Second
		if testing.Short() {
			h.MultiContend = 3 * time.Second
		}
	}
	return h
}

func (h Harness) validate() error {
	if h.TTL < 10*time.Millisecond || h.Transition < 0 || h.MultiContend < 0 {
		return fmt.Errorf("tck: unusable timings: TTL %v (at least 10ms), Transition %v, MultiContend %v",
			h.TTL, h.Transition, h.MultiContend)
	}
	return nil
}

func runCase(t *testing.T, h Harness, c tcase) {
	b := h.Open(t)
	if b.Client == nil {
		t.Fatal("tck: Backend.Client is nil")
	}
	e := &env{t: t, h: h, b: b, ctx: t.Context(), ttl: h.TTL, transition: h.Transition}
	c.run(e)
}

// env is what a case works with: its t, the harness and the backend.
type env struct {
	t               *testing.T
	h               Harness
	b               Backend
	ctx             context.Context // ends when the case ends
	ttl, transition time.Duration

	mu    sync.Mutex
	parts []Partition // healed before any Manager is closed
}

// prompt bounds what the protocol does at once: a hand-off after a
// release, the return of a cancelled Acquire. An order of magnitude, not a
// performance target.
func (e *env) prompt() time.Duration { return e.ttl / 2 }

// takeover bounds how long a waiter may take to get a lock whose holder
// vanished: ttl + transition + the largest jitter (1 s) + ttl of slack for
// one more poll and the store's latency.
func (e *env) takeover() time.Duration { return 2*e.ttl + e.transition + time.Second }

// settle is the time given to goroutines to start waiting before a case
// goes on. Correctness never depends on it; it makes the case meaningful.
func (e *env) settle() time.Duration { return e.ttl / 10 }

// name returns a lock name unique to this case.
func (e *env) name(label string) string {
	return fmt.Sprintf("tck/%s/%s/%s", caseName(e.t), label, randHex())
}

// caseName is the last element of the test's name.
func caseName(t *testing.T) string {
	n := t.Name()
	for i := len(n) - 1; i >= 0; i-- {
		if n[i] == '/' {
			return n[i+1:]
		}
	}
	return n
}

func randHex() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// ghostID returns a contender id for raw Store calls: a contender that no
// Manager runs, so nobody renews or releases its grants.
func ghostID() string { return "tck-ghost-" + randHex() }

// client returns a new client of the store under test.
func (e *env) client() lease.Store {
	s := e.b.Client()
	if s == nil {
		e.t.Fatal("tck: Backend.Client returned nil")
	}
	return s
}

// partitioned returns a tap on a client whose traffic can be cut, or
// skips the case. Cutting the tap cuts the backend's partition too; while
// cut, the tap's calls hang until healed, returning at the end of their
// context exactly when honour is set.
func (e *env) partitioned(honour bool) *tap {
	if e.b.Partitioned == nil {
		e.t.Skip("tck: the harness has no Backend.Partitioned")
	}
	s, p := e.b.Partitioned()
	if s == nil || p == nil {
		e.t.Fatal("tck: Backend.Partitioned returned nil")
	}
	t := newTap(s)
	t.part, t.honour = p, honour
	e.mu.Lock()
	e.parts = append(e.parts, t)
	e.mu.Unlock()
	return t
}

// tapped returns a tap on a new client of the store under test.
func (e *env) tapped() *tap { return newTap(e.client()) }

// newManager returns a Manager on a new client.
func (e *env) newManager() *lease.Manager { return e.manager(e.client()) }

// tappedManager returns a Manager on a tap of a new client, and the tap.
func (e *env) tappedManager(opts ...lease.Option) (*lease.Manager, *tap) {
	e.t.Helper()
	t := e.tapped()
	return e.manager(t.client(), opts...), t
}

// manager returns a Manager on s with the harness timings and options,
// then opts. It is closed when the case ends, after every partition was
// healed.
func (e *env) manager(s lease.Store, opts ...lease.Option) *lease.Manager {
	e.t.Helper()
	all := append([]lease.Option{lease.WithTTL(e.ttl), lease.WithTransition(e.transition)}, e.h.Options...)
	m, err := lease.NewManager(s, append(all, opts...)...)
	if err != nil {
		e.t.Fatalf("NewManager: %v", err)
	}
	e.t.Cleanup(func() {
		e.healAll()
		ctx, cancel := context.WithTimeout(context.Background(), 4*e.takeover())
		defer cancel()
		if err := m.Close(ctx); err != nil && !errors.Is(err, lease.ErrClosed) {
			e.t.Errorf("Close of Manager %s at the end of the case: %v", m.ID(), err)
		}
	})
	return m
}

func (e *env) healAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.parts {
		p.Heal()
	}
}
