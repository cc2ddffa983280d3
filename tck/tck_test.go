package tck_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// The suite's own tests: it passes against memstore in real time (the mode
// of real servers: parallel cases, real clocks), and it fails against
// stores broken on purpose (mutants), each in the cases meant to catch
// that fault. The synctest mode runs in the memstore package (TestTCK).

func memBackend(wrap func(*memstore.Store) lease.Store) func(t *testing.T) tck.Backend {
	return func(t *testing.T) tck.Backend {
		s := wrap(memstore.New())
		return tck.Backend{
			Client:      func() lease.Store { return s },
			Partitioned: func() (lease.Store, tck.Partition) { return tck.Cuttable(s) },
		}
	}
}

func TestMemstoreRealTime(t *testing.T) {
	tck.Run(t, tck.Harness{
		Open:         memBackend(func(s *memstore.Store) lease.Store { return s }),
		MultiContend: 3 * time.Second,
		Fair:         true,
	})
}

const mutantEnv = "TCK_MUTANT"

// mutants are broken stores and the cases that must fail against each.
var mutants = map[string]struct {
	store *hooked
	cases []string
}{
	"flat tokens":          {&hooked{token: func(uint64) uint64 { return 1 }}, []string{"Restart", "TokensIncrease"}},
	"release by anyone":    {&hooked{releaseAnyone: true}, []string{"StaleRenewRelease"}},
	"renew re-acquires":    {&hooked{renewAcquires: true}, []string{"StaleRenewRelease"}},
	"takeover in ttl gap":  {&hooked{earlyTakeover: true}, []string{"TakeoverAfterAbandon"}},
	"no release wake-up":   {&hooked{noWatch: true}, []string{"ReleaseWakesWaiter", "CloseReleases"}},
	"case-folded names":    {&hooked{name: strings.ToLower}, []string{"OddNames"}},
	"names cut at 64 byte": {&hooked{name: func(n string) string { return n[:min(len(n), 64)] }}, []string{"OddNames"}},
}

// TestMutants runs each mutant's cases in a child process and expects
// exactly those cases to fail.
//
// In the child process (the mutant named in the environment), TestMutants
// runs the suite against that mutant instead; the parent asks the child
// for one case with -test.run=^TestMutants$/^Case$.
func TestMutants(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		runMutant(t, mutants[name].store)
		return
	}
	for name, mu := range mutants {
		for _, c := range mu.cases {
			t.Run(strings.ReplaceAll(name, " ", "_")+"/"+c, func(t *testing.T) {
				t.Parallel()
				cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutants$/^"+c+"$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), mutantEnv+"="+name)
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || !strings.Contains(string(out), "--- FAIL: TestMutants/"+c) {
					t.Errorf("case %s did not fail against the mutant %q (err %v):\n%s", c, name, err, out)
				}
			})
		}
	}
}

// runMutant runs the suite against one broken store.
func runMutant(t *testing.T, mu *hooked) {
	tck.Run(t, tck.Harness{
		Open: memBackend(func(s *memstore.Store) lease.Store {
			h := *mu
			h.s = s
			if h.noWatch {
				return &h
			}
			return hookedWatcher{&h}
		}),
		Synctest: true,
	})
}

// hooked is memstore with one fault. It never offers RenewMany, so the
// Manager's renewals go through Renew.
type hooked struct {
	s             *memstore.Store
	name          func(string) string // how names reach the store
	token         func(uint64) uint64 // how tokens reach the client
	releaseAnyone bool                // Release frees the mutex whoever asks
	renewAcquires bool                // Renew is an Acquire: ignores the token, re-acquires late
	earlyTakeover bool                // others may take the mutex once its ttl ended
	noWatch       bool                // no lease.Watcher: waiters only poll
}

func (h *hooked) n(name string) string {
	if h.name == nil {
		return name
	}
	return h.name(name)
}

func (h *hooked) rec(r lease.Record) lease.Record {
	if h.token != nil && r.Token != 0 {
		r.Token = h.token(r.Token)
	}
	return r
}

// realToken maps a client's token back to the store's.
func (h *hooked) realToken(ctx context.Context, name string, token uint64) uint64 {
	if h.token == nil || token == 0 {
		return token
	}
	if cur, err := h.s.Get(ctx, h.n(name)); err == nil && h.token(cur.Token) == token {
		return cur.Token
	}
	return token
}

func (h *hooked) Acquire(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
	if h.earlyTakeover {
		if cur, err := h.s.Get(ctx, h.n(name)); err == nil && cur.Owner != "" && cur.Owner != c && cur.TTL == 0 {
			h.s.Release(ctx, h.n(name), cur.Owner, cur.Token)
		}
	}
	r, err := h.s.Acquire(ctx, h.n(name), c, ttl, tr)
	return h.rec(r), err
}

func (h *hooked) Renew(ctx context.Context, name, c string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
	if h.renewAcquires {
		return h.Acquire(ctx, name, c, ttl, tr)
	}
	r, err := h.s.Renew(ctx, h.n(name), c, h.realToken(ctx, name, token), ttl, tr)
	return h.rec(r), err
}

func (h *hooked) Release(ctx context.Context, name, c string, token uint64) error {
	if h.releaseAnyone && token != 0 {
		if cur, err := h.s.Get(ctx, h.n(name)); err == nil && cur.Owner != "" {
			return h.s.Release(ctx, h.n(name), cur.Owner, cur.Token)
		}
	}
	return h.s.Release(ctx, h.n(name), c, h.realToken(ctx, name, token))
}

func (h *hooked) Get(ctx context.Context, name string) (lease.Record, error) {
	r, err := h.s.Get(ctx, h.n(name))
	return h.rec(r), err
}

type hookedWatcher struct{ *hooked }

func (h hookedWatcher) Watch(ctx context.Context, name, c string) (<-chan lease.Event, error) {
	return h.s.Watch(ctx, h.n(name), c)
}
