package sqlstore

import (
	"context"
	"database/sql"
	"time"

	mydb "github.com/simba-go/simba/internal/db/mysql"
)

// holdRetry bounds the pause between attempts to take a doorbell that
// another session keeps (a waiter passing it on holds it for one round
// trip; a paused former holder, until its session ends).
const (
	holdRetryMin = 10 * time.Millisecond
	holdRetryMax = time.Second
	holdCallMax  = 5 * time.Second // one doorbell statement at most
)

// hold is the holder loop: on one connection of its own it holds the
// doorbell of every grant this Store holds, dropping it when the grant ends
// or lapses, and exits (handing the connection back without any doorbell)
// once there is none.
func (b *doorbells) hold() {
	defer b.wg.Done()
	var conn *sql.Conn
	have := map[string]bool{} // doorbells conn's session holds
	retry := holdRetryMin
	for {
		b.mu.Lock()
		now := time.Now()
		want := make(map[string]bool, len(b.held))
		next := now.Add(time.Hour)
		for m, until := range b.held {
			if !now.Before(until) { // lapsed without a renewal: ring
				delete(b.held, m)
				continue
			}
			want[m] = true
			if until.Before(next) {
				next = until
			}
		}
		if len(want) == 0 && len(have) == 0 {
			b.holding = false
			b.mu.Unlock()
			if conn != nil {
				conn.Close()
			}
			return
		}
		b.mu.Unlock()

		ok, pending := true, false
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
			conn, _ = b.db.Conn(ctx)
			cancel()
		}
		if conn != nil {
			ok, pending = b.sync(conn, have, want)
		}
		if !ok || conn == nil {
			if conn != nil {
				discard(conn) // its session ends: every doorbell it held rings
				conn = nil
			}
			clear(have)
			pending = len(want) > 0
		}
		if len(want) == 0 && len(have) == 0 {
			continue // all dropped: hand the connection back
		}
		wait := time.Until(next)
		if pending {
			wait = min(wait, retry)
			retry = min(2*retry, holdRetryMax)
		} else {
			retry = holdRetryMin
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-b.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// sync makes the doorbells of conn's session match want: drops first (a
// released grant rings at once), then takes. ok is false when conn failed
// and must be discarded; pending is true when a doorbell that is wanted
// could not be taken yet.
func (b *doorbells) sync(conn *sql.Conn, have, want map[string]bool) (ok, pending bool) {
	ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
	defer cancel()
	for m := range have {
		if want[m] {
			continue
		}
		if !b.drop(ctx, conn, m) {
			return false, false
		}
		delete(have, m)
	}
	for m := range want {
		if have[m] {
			continue
		}
		taken, err := b.q.TakeDoorbell(ctx, conn, mydb.TakeDoorbellParams{Scope: b.scope, Mutex: []byte(m)})
		if err != nil {
			b.log.Warn("sqlstore: doorbell connection failed; waiters poll until it is back", "error", err)
			return false, false
		}
		if taken == 1 {
			have[m] = true
		} else {
			pending = true
		}
	}
	return true, pending
}
