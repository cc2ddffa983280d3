package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// env is what a scenario runs on.
type env struct {
	t      Target
	s      Servers
	holder func(id, key string) *exec.Cmd
	// fresh names this run of the scenario apart from every other
	// (manyKeysRun's keys): "b2" for the third run of (b).
	fresh string
}

// key returns a lock name of this target alone, so that targets sharing a
// server never meet on a key.
func (e env) key(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(e.t.ID()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String() + "-" + name
}

type scenario struct {
	id, letter, title, method string
	cols                      []Column
	budget                    time.Duration
	parallel                  bool // all targets at once: the scenario waits, it does not load
	// runs > 1: each target runs that many times, the targets taking
	// turns, and its row is the run with the median value of column
	// median (see Run): a throughput measured for a few seconds on a
	// shared machine drifts by tens of percent between runs.
	runs, median int
	run          func(ctx context.Context, e env) ([]float64, string, error)
}

// Durations of the measurements, chosen so that a whole run stays near ten
// minutes on two cores.
const (
	uncontendedFor = 2 * time.Second
	manyKeysFor    = 2 * time.Second // per shape: a client per goroutine, one shared client
	handoffFor     = 4 * time.Second
	handoffMax     = 200
	handoffHold    = time.Millisecond
	waiterLoadFor  = 5 * time.Second
	// renewFor is a whole number of keep-alive periods of a 4-s
	// ZooKeeper session (a ping every 4/3 s): the few pings of a 10-s
	// window came to 7 or 8 by where the window fell between them, a
	// 13% step between two clients that ping alike.
	renewFor       = 12 * time.Second
	renewTakeFor   = 20 * time.Second // to take the renewLocks locks
	throughputRuns = 3                // runs of each target in (a), (b) and (b′)
	manyKeys       = 10000
	manyKeysGs     = 64
	waiters        = 32
	renewLocks     = 1000
)

func scenarios() []scenario {
	ss := []scenario{{
		id: "a", letter: "a", title: "(a) Uncontended acquire + release",
		method: fmt.Sprintf("One client locks and unlocks one key in a loop for %v after three warm-up cycles. "+
			"Acquire is the time Lock took, release the time Unlock took; pairs/s counts whole cycles. "+
			"%s", uncontendedFor, runsNote("pairs/s")),
		cols: []Column{
			{Name: "acquire p50", Kind: Duration, Better: -1, Ratio: true},
			{Name: "acquire p99", Kind: Duration, Better: -1},
			{Name: "release p50", Kind: Duration, Better: -1},
			{Name: "pairs/s", Kind: Rate, Better: +1, Ratio: true},
		},
		budget: uncontendedFor + 30*time.Second, run: uncontended, runs: throughputRuns, median: 3,
	}, {
		id: "b", letter: "b", title: fmt.Sprintf("(b) %d goroutines over %s keys, a client each", manyKeysGs, thousands(manyKeys)),
		method: fmt.Sprintf("%d goroutines, each with a client of its own (as %d processes would), lock a key drawn uniformly "+
			"from %s and unlock it at once, for %v. Collisions are rare and wait as the library waits. %s "+
			"Every run, of (b) and of (b′), draws from names no other run used, so that each starts from the same state: "+
			"what one run leaves behind is not the same for every library (the ZooKeeper recipe's lock nodes are persistent "+
			"and stay after the unlock, simba's are containers the server deletes once empty; with the names shared, 7%% of the "+
			"cycles of the recipe's third run met a missing lock node, against 61%% of simba's).",
			manyKeysGs, manyKeysGs, thousands(manyKeys), manyKeysFor, runsNote("cycles/s")),
		cols:   manyKeysCols(),
		runs:   throughputRuns,
		budget: manyKeysFor + 60*time.Second,
		run:    func(ctx context.Context, e env) ([]float64, string, error) { return manyKeysRun(ctx, e, false) },
	}, {
		id: "bs", letter: "b", title: fmt.Sprintf("(b′) %d goroutines over %s keys, one client shared", manyKeysGs, thousands(manyKeys)),
		method: fmt.Sprintf("As (b), but all %d goroutines share one client, as the goroutines of one application would: for simba "+
			"one `lease.Manager` over one store; for a peer one client object, as its documentation allows (one go-redis client "+
			"with redsync or redislock, one `*sql.DB` with pglock, advisory locks and go-mysql-lock, one `zk.Conn`, one etcd "+
			"client whose sessions a lock takes from a free list, since two Mutexes of one Session on one key would both hold). "+
			"For %v. %s", manyKeysGs, manyKeysFor, runsNote("cycles/s")),
		cols:   manyKeysCols(),
		runs:   throughputRuns,
		budget: manyKeysFor + 60*time.Second,
		run:    func(ctx context.Context, e env) ([]float64, string, error) { return manyKeysRun(ctx, e, true) },
	}}
	for _, k := range []int{2, 8, 32} {
		ss = append(ss, scenario{
			id: fmt.Sprintf("c%d", k), letter: "c", title: fmt.Sprintf("(c) Hand-off, K = %d contenders on one mutex", k),
			method: fmt.Sprintf("%d contenders, each with a client of its own, loop on one key: lock, unlock, wait until another "+
				"contender has the lock, lock again. A holder unlocks %v after all the others are in Lock, so every waiter has made "+
				"its first attempt and waits the way its library waits (polling libraries: the one that just came back waits about its "+
				"whole retry delay). The gap runs from the moment the holder calls Unlock to the moment the "+
				"next contender's Lock returns, so it includes the release's round trip. Stops after %d hand-offs or %v. "+
				"Jain's index is over the acquisitions per contender (1 = all equal, 1/K = one took all; with K = 2 the protocol "+
				"makes contenders alternate, so it is 1 by construction); the longest wait is the longest completed Lock call. "+
				"The first round, until every contender has had the lock once, also waits for %d clients that all start at once "+
				"(their first connections, subscriptions and sessions); the warm longest wait counts only the Lock calls that began "+
				"after it (— when none did).", k, handoffHold, handoffMax, handoffFor, k),
			cols: []Column{
				{Name: "hand-offs", Kind: Count},
				{Name: "gap p50", Kind: Duration, Better: -1, Ratio: true},
				{Name: "gap p99", Kind: Duration, Better: -1},
				{Name: "Jain", Kind: Index, Better: +1, Ratio: true},
				{Name: "longest wait", Kind: Duration, Better: -1},
				{Name: "longest wait, warm", Kind: Duration, Better: -1},
			},
			budget: handoffFor + 30*time.Second,
			run:    func(ctx context.Context, e env) ([]float64, string, error) { return handoff(ctx, e, k) },
		})
	}
	ss = append(ss, scenario{
		id: "d", letter: "d", title: fmt.Sprintf("(d) Waiter load: one holder, %d waiters", waiters),
		method: fmt.Sprintf("One client holds a key; %d more clients block in Lock on it. After 0.5 s (%v on PostgreSQL, "+
			"whose idle backends may publish their counts that late) the server's counter is read, "+
			"and again %v later: what waiting costs the server per second (the holder's own renewals included). "+
			"Server ops count every command the server runs (for Redis, also those a script runs); round trips count the "+
			"clients' requests (a script or a pipeline is one), counted in the clients for Redis and equal to the server ops elsewhere.",
			waiters, pgStatsSettle, waiterLoadFor),
		cols: []Column{
			{Name: "server ops/s", Kind: Rate, Better: -1, Ratio: true},
			{Name: "round trips/s", Kind: Rate, Better: -1, Ratio: true},
			{Name: "trips per waiter/s", Kind: Rate, Better: -1},
		},
		budget: waiterLoadFor + 40*time.Second, run: waiterLoad,
	}, scenario{
		id: "e", letter: "e", title: fmt.Sprintf("(e) Renewal cost: %s held locks", thousands(renewLocks)),
		method: fmt.Sprintf("One client takes %s locks one after another and holds them for %v; the server's counter is read "+
			"at the start and the end of the %v (server ops and round trips as in (d); on PostgreSQL the start comes %v after the "+
			"last lock was taken, so that the taking is not counted). "+
			"Locks without a lease (they live as long as a connection) are not run; taking the locks may take %v at most.",
			thousands(renewLocks), renewFor, renewFor, pgStatsSettle, renewTakeFor),
		cols: []Column{
			{Name: "take all", Kind: Duration, Better: -1},
			{Name: "server ops/s", Kind: Rate, Better: -1, Ratio: true},
			{Name: "round trips/s", Kind: Rate, Better: -1, Ratio: true},
			{Name: "trips per lock/s", Kind: Rate, Better: -1},
		},
		budget: renewFor + 60*time.Second, run: renewal,
	}, scenario{
		id: "f", letter: "f", title: "(f) Takeover after kill -9 of the holder",
		method: "A holder process (this test binary again) takes a key and says so; a waiter in this process starts Lock, " +
			"0.3 s later the holder is killed with SIGKILL, and the time until the waiter's Lock returns is measured. " +
			"The lease column is the configured time a dead holder's lock lives on (0: it dies with the connection). " +
			"All targets run this scenario at the same time: it measures lease expiry, not throughput.",
		cols: []Column{
			{Name: "lease", Kind: Duration},
			{Name: "takeover", Kind: Duration, Better: -1, Ratio: true},
		},
		budget: 75 * time.Second, parallel: true, run: takeover,
	})
	return ss
}

func uncontended(ctx context.Context, e env) ([]float64, string, error) {
	cs, closeAll, err := openN(ctx, e.t, 1)
	if err != nil {
		return nil, "", err
	}
	defer closeAll()
	c, key := cs[0], e.key("a")
	var acq, rel []time.Duration
	var start time.Time
	for i := 0; ; i++ {
		if i == 3 {
			start, acq, rel = time.Now(), nil, nil
		}
		if i > 3 && time.Since(start) >= uncontendedFor {
			break
		}
		t0 := time.Now()
		l, err := c.Lock(ctx, key)
		if err != nil {
			return nil, "", fmt.Errorf("lock: %w", err)
		}
		t1 := time.Now()
		if err := l.Unlock(ctx); err != nil {
			return nil, "", fmt.Errorf("unlock: %w", err)
		}
		acq, rel = append(acq, t1.Sub(t0)), append(rel, time.Since(t1))
	}
	n := float64(len(acq))
	return []float64{percentile(acq, .5), percentile(acq, .99), percentile(rel, .5), n / time.Since(start).Seconds()},
		fmt.Sprintf("%d cycles", len(acq)), nil
}

// manyKeysCols are the columns of scenarios b and bs.
// runsNote describes how a scenario with throughputRuns runs picks its
// row, by the column col.
func runsNote(col string) string {
	return fmt.Sprintf("Each target runs %d times, the targets taking turns (all targets once, then all again in the "+
		"reverse order, and so on: a server still warming up favours whoever comes later); "+
		"its row is the run with the median %s, and the note gives all %d.", throughputRuns, col, throughputRuns)
}

func manyKeysCols() []Column {
	return []Column{
		{Name: "cycles/s", Kind: Rate, Better: +1, Ratio: true},
		{Name: "cycle p50", Kind: Duration, Better: -1},
		{Name: "cycle p99", Kind: Duration, Better: -1},
	}
}

// manyKeysRun is scenario b (a client per goroutine) and, when shared, bs
// (one client for all goroutines).
func manyKeysRun(ctx context.Context, e env, shared bool) ([]float64, string, error) {
	var (
		cs       []Client
		closeAll func()
		err      error
	)
	if shared {
		cs, closeAll, err = openShared(ctx, e.t, manyKeysGs)
	} else {
		cs, closeAll, err = openN(ctx, e.t, manyKeysGs)
	}
	if err != nil {
		return nil, "", err
	}
	defer closeAll()
	run, cancel := context.WithTimeout(ctx, manyKeysFor)
	defer cancel()
	var (
		mu     sync.Mutex
		cycles []time.Duration
		first  error
		wg     sync.WaitGroup
	)
	start := time.Now()
	for _, c := range cs {
		wg.Go(func() {
			var mine []time.Duration
			var err error
			for run.Err() == nil {
				t0 := time.Now()
				var l Lock
				l, err = c.Lock(run, e.key(e.fresh+"-"+strconv.Itoa(rand.IntN(manyKeys))))
				if err != nil {
					if run.Err() != nil {
						err = nil
					}
					break
				}
				if err = unlock(l); err != nil {
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			cycles = append(cycles, mine...)
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if first != nil {
		return nil, "", first
	}
	return []float64{float64(len(cycles)) / time.Since(start).Seconds(), percentile(cycles, .5), percentile(cycles, .99)},
		fmt.Sprintf("%d cycles", len(cycles)), nil
}

func handoff(ctx context.Context, e env, k int) ([]float64, string, error) {
	cs, closeAll, err := openN(ctx, e.t, k)
	if err != nil {
		return nil, "", err
	}
	defer closeAll()
	run, cancel := context.WithTimeout(ctx, handoffFor)
	defer cancel()
	key := e.key(fmt.Sprintf("c%d", k))
	var (
		mu       sync.Mutex
		holder   = -1
		released time.Time             // when the last holder called Unlock
		acquired = make(chan struct{}) // closed at the next acquisition
		gaps     []time.Duration
		acqs     = make([]int, k)
		n        int
		inLock   int // contenders in a Lock call
		overlaps int
		longest  time.Duration
		warm     time.Time     // when every contender had had the lock once; zero before
		warmLong time.Duration // the longest Lock call that began after warm
		warmN    int           // such calls
		first    error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	// othersWaiting waits until every other contender is in Lock, and then
	// handoffHold more, so that each has made its first attempt and waits
	// the way its library waits.
	othersWaiting := func() {
		for run.Err() == nil {
			mu.Lock()
			all := inLock >= k-1
			mu.Unlock()
			if all {
				break
			}
			_ = sleep(run, 100*time.Microsecond)
		}
		_ = sleep(run, handoffHold)
	}
	for i, c := range cs {
		wg.Go(func() {
			for run.Err() == nil {
				t0 := time.Now()
				mu.Lock()
				inLock++
				mu.Unlock()
				l, err := c.Lock(run, key)
				now := time.Now()
				mu.Lock()
				inLock--
				if err != nil {
					mu.Unlock()
					if run.Err() == nil {
						fail(fmt.Errorf("lock: %w", err))
					}
					return
				}
				if holder >= 0 {
					overlaps++
				}
				holder = i
				if !released.IsZero() {
					gaps = append(gaps, now.Sub(released))
				}
				acqs[i]++
				n++
				longest = max(longest, now.Sub(t0))
				if !warm.IsZero() && t0.After(warm) {
					warmLong, warmN = max(warmLong, now.Sub(t0)), warmN+1
				} else if warm.IsZero() && !slices.Contains(acqs, 0) {
					warm = now
				}
				close(acquired)
				acquired = make(chan struct{})
				if n > handoffMax {
					cancel()
				}
				next := acquired
				mu.Unlock()
				othersWaiting()
				mu.Lock()
				holder, released = -1, time.Now()
				mu.Unlock()
				if err := unlock(l); err != nil {
					fail(fmt.Errorf("unlock: %w", err))
					return
				}
				select { // let another contender have it
				case <-next:
				case <-run.Done():
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, "", first
	}
	if overlaps > 0 {
		return nil, "", fmt.Errorf("%d acquisitions while another contender held the lock", overlaps)
	}
	if n == 0 {
		return nil, "", errors.New("nobody acquired the lock")
	}
	if len(gaps) == 0 {
		return []float64{0, math.NaN(), math.NaN(), math.NaN(), longest.Seconds(), math.NaN()}, fmt.Sprintf("no hand-off within %v: the gap is longer", handoffFor), nil
	}
	warmWait := math.NaN()
	if warmN > 0 {
		warmWait = warmLong.Seconds()
	}
	return []float64{float64(len(gaps)), percentile(gaps, .5), percentile(gaps, .99), jain(acqs), longest.Seconds(), warmWait}, "", nil
}

func waiterLoad(ctx context.Context, e env) ([]float64, string, error) {
	if e.t.Ops == nil {
		return nil, "the server does not count requests", errSkip
	}
	cs, closeAll, err := openN(ctx, e.t, waiters+1)
	if err != nil {
		return nil, "", err
	}
	defer closeAll()
	key := e.key("d")
	held, err := cs[0].Lock(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("holder: %w", err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var (
		wg      sync.WaitGroup
		granted atomic.Int64
	)
	for _, c := range cs[1:] {
		wg.Go(func() {
			if l, err := c.Lock(wctx, key); err == nil {
				granted.Add(1)
				_ = unlock(l)
			}
		})
	}
	c0, err1 := sleepThenCount(ctx, e.t, max(500*time.Millisecond, e.t.Settle))
	t0 := time.Now()
	c1, err2 := sleepThenCount(ctx, e.t, waiterLoadFor)
	el := time.Since(t0).Seconds()
	wcancel()
	wg.Wait()
	err = errors.Join(err1, err2, unlock(held))
	if g := granted.Load(); g > 0 {
		return nil, "", fmt.Errorf("%d waiters were granted the lock while it was held", g)
	}
	if err != nil {
		return nil, "", err
	}
	ops, trips := c1.rates(c0, el)
	return []float64{ops, trips, trips / waiters}, "", nil
}

// counts are a target's server operations and client round trips so far.
type counts struct{ ops, trips int64 }

// rates returns the operations and round trips per second since c0.
func (c counts) rates(c0 counts, seconds float64) (ops, trips float64) {
	return float64(c.ops-c0.ops) / seconds, float64(c.trips-c0.trips) / seconds
}

// sleepThenCount waits d and reads the target's counters: round trips are
// server operations where the target does not count them (Target.Trips).
func sleepThenCount(ctx context.Context, t Target, d time.Duration) (counts, error) {
	if err := sleep(ctx, d); err != nil {
		return counts{}, err
	}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ops, err := t.Ops(octx)
	if err != nil {
		return counts{}, err
	}
	c := counts{ops, ops}
	if t.Trips != nil {
		c.trips = t.Trips()
	}
	return c, nil
}

func renewal(ctx context.Context, e env) ([]float64, string, error) {
	switch {
	case e.t.Ops == nil:
		return nil, "the server does not count requests", errSkip
	case e.t.Takeover == 0:
		return nil, "no lease: the lock lives as long as its connection", errSkip
	}
	cs, closeAll, err := openN(ctx, e.t, 1)
	if err != nil {
		return nil, "", err
	}
	defer closeAll()
	var locks []Lock
	defer func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, l := range locks {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_ = unlock(l)
			})
		}
		wg.Wait()
	}()
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, renewTakeFor)
	defer cancel()
	for i := range renewLocks {
		l, err := cs[0].Lock(tctx, e.key(fmt.Sprintf("e%d", i)))
		if err != nil {
			return nil, "", fmt.Errorf("lock %d of %d: %w", i+1, renewLocks, err)
		}
		locks = append(locks, l)
	}
	took := time.Since(start).Seconds()
	c0, err := sleepThenCount(ctx, e.t, e.t.Settle)
	if err != nil {
		return nil, "", err
	}
	t0 := time.Now()
	c1, err := sleepThenCount(ctx, e.t, renewFor)
	if err != nil {
		return nil, "", err
	}
	ops, trips := c1.rates(c0, time.Since(t0).Seconds())
	return []float64{took, ops, trips, trips / renewLocks}, "", nil
}

func takeover(ctx context.Context, e env) ([]float64, string, error) {
	if e.holder == nil {
		return nil, "no holder process", errSkip
	}
	key := e.key("f")
	cmd := e.holder(e.t.ID(), key)
	cmd.SysProcAttr = childAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	defer func() { kill(); _ = cmd.Wait() }()

	holding := make(chan struct{})
	var lines strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == holdingLine {
				close(holding)
				for sc.Scan() { // drain until the holder dies
				}
				return
			}
			lines.WriteString(sc.Text() + "\n")
		}
	}()
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		kill()
		return nil, "", fmt.Errorf("holder did not hold within 30 s: %s", oneLine(stderr.String()))
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}

	cs, closeAll, err := openN(ctx, e.t, 1)
	if err != nil {
		return nil, "", err
	}
	defer closeAll()
	type result struct {
		l   Lock
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		l, err := cs[0].Lock(wctx, key)
		got <- result{l, err, time.Now()}
	}()
	select {
	case r := <-got:
		if r.err == nil {
			_ = unlock(r.l)
			return nil, "", errors.New("the waiter was granted the lock while the holder held it")
		}
		return nil, "", fmt.Errorf("waiter: %w", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	killed := time.Now()
	kill()
	limit := time.NewTimer(e.t.Takeover + 30*time.Second)
	defer limit.Stop()
	select {
	case r := <-got:
		if r.err != nil {
			return nil, "", fmt.Errorf("waiter: %w", r.err)
		}
		_ = unlock(r.l)
		return []float64{e.t.Takeover.Seconds(), r.at.Sub(killed).Seconds()}, "", nil
	case <-limit.C:
		wcancel()
		if r := <-got; r.err == nil {
			_ = unlock(r.l)
		}
		return []float64{e.t.Takeover.Seconds(), math.NaN()}, "", fmt.Errorf("no takeover within %v", e.t.Takeover+30*time.Second)
	}
}
