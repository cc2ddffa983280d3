package sqlstore

import (
	"context"
	"database/sql"
	"time"
)

// holdRetry bounds the pause between attempts to take a bell that another
// session keeps (a paused former waiter, until its session ends).
const (
	holdRetryMin = 10 * time.Millisecond
	holdRetryMax = time.Second
	holdCallMax  = 5 * time.Second // one doorbell statement at most
)

// heldGrant is a grant without a ringer that others wait for: until when
// this Store holds it at the latest.
type heldGrant struct{ until time.Time }

// wakeHolder starts the holder loop or wakes it. Called with mu held.
func (b *bells) wakeHolder() {
	if !b.holding {
		b.holding = true
		b.wg.Add(1)
		go b.hold()
		return
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// hold is the holder loop: on one connection of its own it holds the bell
// of every grant without a ringer that others wait for, letting it go when
// the grant ends or lapses, and exits (handing the connection back without
// any bell) once there is none.
func (b *bells) hold() {
	defer b.wg.Done()
	var conn *sql.Conn
	have := map[bellID]bool{} // bells conn's session holds
	retry := holdRetryMin
	for {
		b.mu.Lock()
		now := time.Now()
		want := make(map[bellID]bool, len(b.held))
		next := now.Add(time.Hour)
		for id, g := range b.held {
			if !now.Before(g.until) { // lapsed without a renewal: let go
				delete(b.held, id)
				continue
			}
			want[id] = true
			next = minTime(next, g.until)
		}
		heldN := len(b.held)
		if heldN == 0 && len(have) == 0 {
			b.holding = false
			b.mu.Unlock()
			if conn != nil {
				conn.Close()
			}
			return
		}
		b.mu.Unlock()

		ok, pending := true, false
		if conn == nil && len(want) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
			conn, _ = b.db.Conn(ctx)
			cancel()
		}
		if conn != nil {
			ok, pending = b.sync(conn, have, want)
		}
		if !ok || conn == nil && len(want) > 0 {
			if conn != nil {
				discard(conn) // its session ends: every bell it held lets go
				conn = nil
			}
			clear(have)
			pending = len(want) > 0
		}
		if heldN == 0 && len(have) == 0 {
			continue // all let go: hand the connection back
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

// sync makes the bells of conn's session match want: lets go first (an
// ended grant wakes its waiter at once), then takes. ok is false when conn
// failed and must be discarded; pending is true when a wanted bell could
// not be taken yet.
func (b *bells) sync(conn *sql.Conn, have, want map[bellID]bool) (ok, pending bool) {
	ctx, cancel := context.WithTimeout(context.Background(), holdCallMax)
	defer cancel()
	for id := range have {
		if want[id] {
			continue
		}
		dropped, err := b.sql.drop(ctx, conn, id)
		if err != nil || !dropped {
			return false, false
		}
		delete(have, id)
	}
	for id := range want {
		if have[id] {
			continue
		}
		taken, err := b.sql.take(ctx, conn, id)
		if err != nil {
			b.log.Warn("sqlstore: doorbell connection failed; waiters poll until it is back", "error", err)
			return false, false
		}
		if taken {
			have[id] = true
		} else {
			pending = true
		}
	}
	return true, pending
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
