package redisstore_test

import (
	"testing"
	"time"
)

// TestRenewalsReportServerTime (issue 15): renewals report the Redis
// server's clock (one TIME in the renewal pipeline), and it advances
// between renewals as this host's clock allows (the server runs on this
// host), as the lease's clock step detector assumes.
func TestRenewalsReportServerTime(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	tok := mustHold(t, s, "clock/renewed", "a").Token
	type reading struct{ sent, recv, server time.Time }
	var rs []reading
	for i := 0; i < 4; i++ {
		if i > 0 {
			time.Sleep(30 * time.Millisecond)
		}
		sent := time.Now()
		rec, err := s.Renew(bg, "clock/renewed", "a", tok, ttl, tr)
		recv := time.Now()
		if err != nil || !rec.Held("a") {
			t.Fatalf("Renew = %+v, %v", rec, err)
		}
		if rec.ServerTime.IsZero() {
			t.Fatalf("renewal %d reports no server time", i)
		}
		if d := rec.ServerTime.Sub(sent); d < -time.Minute || d > time.Minute {
			t.Errorf("server time %v is %v from this host's clock", rec.ServerTime, d)
		}
		rs = append(rs, reading{sent, recv, rec.ServerTime})
	}
	const round = time.Millisecond // TIME has microseconds
	for i := 1; i < len(rs); i++ {
		p, r := rs[i-1], rs[i]
		served := r.server.Sub(p.server)
		if lo, hi := r.sent.Sub(p.recv)-round, r.recv.Sub(p.sent)+round; served < lo || served > hi {
			t.Errorf("server time advanced %v between renewals; this host's clock allows %v to %v", served, lo, hi)
		}
	}
}
