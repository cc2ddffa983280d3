package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errNotPgx is returned by a listener session whose connection is not
// pgx's: LISTEN needs pgx's WaitForNotification.
var errNotPgx = errors.New("sqlstore: the PostgreSQL driver is not pgx's stdlib; waiters poll")

// channelName is the notification channel of table: the table name itself
// (as PostgreSQL folds it), or, when longer than an identifier may be, a
// digest of it.
func channelName(table string) string {
	ch := strings.ToLower(table)
	if len(ch) <= 63 {
		return ch
	}
	sum := sha256.Sum256([]byte(ch))
	return "simba_" + hex.EncodeToString(sum[:12])
}

// listener delivers the NOTIFYs of the release statement to a hub: while
// the hub has subscribers it keeps one connection of the pool in LISTEN,
// reconnecting with backoff when it breaks and telling every subscriber to
// check again after each (re)connection. Its start and stop run under the
// hub's mu.
type listener struct {
	db      *sql.DB
	channel string
	hub     *hub
	log     *slog.Logger

	cancel context.CancelFunc // of the running session loop; nil when stopped
	wg     sync.WaitGroup     // session loops, running or ending
}

func (l *listener) start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go l.run(ctx)
}

// close waits for every session loop to end (after stop).
func (l *listener) close() { l.wg.Wait() }

func (l *listener) stop() {
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
}

// run keeps a LISTEN session until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer l.wg.Done()
	for n := 0; ctx.Err() == nil; n++ {
		err := l.session(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errNotPgx):
			l.log.Warn("sqlstore: no LISTEN/NOTIFY: waiters poll", "error", err)
			l.hub.giveUp(nil)
			return
		case err != nil:
			l.log.Warn("sqlstore: LISTEN connection failed; waiters poll until it is back", "error", err)
		}
		if !sleepCtx(ctx, reconnectBackoff(n)) {
			return
		}
	}
}

// session borrows a connection, LISTENs on it and delivers notifications
// until ctx ends (then it UNLISTENs and returns the connection to the
// pool) or the connection fails (then the pool discards it).
func (l *listener) session(ctx context.Context) error {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := asPgx(dc)
		if !ok {
			return errNotPgx
		}
		if err := c.exec(ctx, "LISTEN "+pgQuote(l.channel)); err != nil {
			return badConn(ctx, c, err)
		}
		// Releases before this moment were not heard: everyone looks again.
		l.hub.hearing(true)
		defer l.hub.hearing(false)
		l.hub.recheck()
		for {
			payload, err := c.waitForNotification(ctx)
			if err != nil {
				return badConn(ctx, c, err)
			}
			l.deliver(payload)
		}
	})
}

// deliver routes one notification of the release statement:
// "HEAD" "NEXT" (16 letters each; dashes when there is no next) window_ms
// ":" lock, for the first and second waiter. A payload of another form
// (a release of an earlier version of this package: just the lock) wakes
// every waiter of the lock it names.
func (l *listener) deliver(payload string) {
	head, next, window, name, ok := parseHandoff(payload)
	if !ok {
		l.hub.notify(payload)
		return
	}
	l.hub.handoff(name, head, next, window)
}

// parseHandoff splits a hand-off notification (see deliver).
func parseHandoff(p string) (head, next string, window time.Duration, name string, ok bool) {
	if len(p) < 2*keyLen+2 || !isKey(p[:keyLen]) {
		return "", "", 0, "", false
	}
	head, next = p[:keyLen], p[keyLen:2*keyLen]
	if next == strings.Repeat("-", keyLen) {
		next = ""
	} else if !isKey(next) {
		return "", "", 0, "", false
	}
	rest := p[2*keyLen:]
	colon := strings.IndexByte(rest, ':')
	if colon < 1 {
		return "", "", 0, "", false
	}
	ms, err := strconv.ParseInt(rest[:colon], 10, 64)
	if err != nil || ms < 0 || ms > int64(maxHandoff/time.Millisecond) {
		return "", "", 0, "", false
	}
	return head, next, time.Duration(ms) * time.Millisecond, rest[colon+1:], true
}

// isKey reports whether s is a queue key: keyLen letters a-p.
func isKey(s string) bool {
	if len(s) != keyLen {
		return false
	}
	for i := range len(s) {
		if s[i] < 'a' || s[i] > 'p' {
			return false
		}
	}
	return true
}

// badConn decides the fate of a listening connection after err: when the
// session was stopped (ctx ended) and UNLISTEN works, the connection goes
// back to the pool clean; otherwise driver.ErrBadConn makes database/sql
// discard it.
func badConn(ctx context.Context, c pgxConn, err error) error {
	if ctx.Err() == nil || c.isClosed() {
		return errors.Join(err, driver.ErrBadConn)
	}
	uctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if uerr := c.exec(uctx, "UNLISTEN *"); uerr != nil {
		return errors.Join(err, driver.ErrBadConn)
	}
	return ctx.Err()
}

// pgQuote quotes a PostgreSQL identifier.
func pgQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
