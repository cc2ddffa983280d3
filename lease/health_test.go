package lease_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// probe asks h over HTTP and returns the status and body.
func probe(h *lease.HealthCheck) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return w.Code, w.Body.String()
}

func wantHealthy(t *testing.T, h *lease.HealthCheck, when string) {
	t.Helper()
	if code, body := probe(h); code != http.StatusOK || body != "ok\n" {
		t.Errorf("%s: %d %q, want 200 ok", when, code, body)
	}
	if err := h.Check(nil); err != nil {
		t.Errorf("%s: Check: %v", when, err)
	}
}

func wantUnhealthy(t *testing.T, h *lease.HealthCheck, when, reason string) {
	t.Helper()
	code, body := probe(h)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, reason) {
		t.Errorf("%s: %d %q, want 503 saying %q", when, code, body, reason)
	}
	if err := h.Check(nil); !errors.Is(err, lease.ErrUnhealthy) {
		t.Errorf("%s: Check: %v, want ErrUnhealthy", when, err)
	}
}

// TestHealthFollowsRenewals (issue 20): a held lease whose renewals fail
// turns the check from ok to failing once its renewal is overdue by more
// than the tolerance, and back to ok as soon as a renewal is confirmed
// again, before the lease is lost.
func TestHealthFollowsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a") // renewal due 1s after the acquire; deadline 3.5s
		h, err := m.HealthCheck(500 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		wantHealthy(t, h, "no lease")
		l := mustAcquire(t, m, "job")
		time.Sleep(500 * time.Millisecond)
		st.FailContender("a", memstore.FaultFail)
		time.Sleep(900 * time.Millisecond) // +1.4s: 400ms overdue
		wantHealthy(t, h, "renewal 400ms overdue")
		time.Sleep(200 * time.Millisecond) // +1.6s: 600ms overdue
		wantUnhealthy(t, h, "renewal 600ms overdue", `no renewal of "job"`)
		st.Heal()
		time.Sleep(time.Second) // the next retry (at most ttl/5 later) is confirmed
		if !l.Held() {
			t.Fatal("the lease was lost: the test needs it held")
		}
		wantHealthy(t, h, "renewals confirmed again")
	})
}

// TestHealthFollowsHungRenewals: a renewal that hangs (it neither fails
// nor returns) is overdue all the same.
func TestHealthFollowsHungRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		h, _ := m.HealthCheck(500 * time.Millisecond)
		mustAcquire(t, m, "job")
		st.FailContender("a", memstore.FaultHang)
		time.Sleep(1600 * time.Millisecond)
		wantUnhealthy(t, h, "renewal hangs", `no renewal of "job"`)
		st.Heal()
		synctest.Wait()
		wantHealthy(t, h, "hung renewal returned")
	})
}

// TestHealthFollowsTheStore: calls that keep failing for longer than the
// call timeout (ttl/4 = 750ms) make the check fail even with no lease
// held; an answered call makes it pass, and so does a store nobody has
// called for longer than ttl.
func TestHealthFollowsTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		h, _ := m.HealthCheck(time.Second)
		down := func() {
			st.SetFault(func(memstore.Op, string, string) memstore.Fault { return memstore.FaultFail })
		}
		down()
		try := func() {
			if l, err := m.TryAcquire(bg, "job"); err == nil {
				_ = l.Release(bg)
			}
			synctest.Wait()
		}
		try()
		time.Sleep(500 * time.Millisecond)
		try()
		wantHealthy(t, h, "failing for 500ms")
		time.Sleep(500 * time.Millisecond)
		try()
		wantUnhealthy(t, h, "failing for 1s", "the store has answered no call")
		st.Heal()
		try()
		wantHealthy(t, h, "answered again")

		down()
		try()
		time.Sleep(time.Second)
		try()
		wantUnhealthy(t, h, "failing again", "the store has answered no call")
		time.Sleep(tTTL + time.Millisecond)
		wantHealthy(t, h, "no call for longer than ttl")
		st.Heal()
	})
}

func TestHealthCheckNeedsPositiveTolerance(t *testing.T) {
	m, err := lease.NewManager(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := m.HealthCheck(d); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("tolerance %v: %v, want ErrInvalidArgument", d, err)
		}
	}
	if h, _ := m.HealthCheck(time.Second); h.Name() != "simba-lease" {
		t.Errorf("name %q", h.Name())
	}
}
