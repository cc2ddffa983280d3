package sqlstore_test

import (
	"database/sql"
	"testing"

	mydb "github.com/simba-go/simba/internal/db/mysql"
	pgdb "github.com/simba-go/simba/internal/db/postgres"
	"github.com/simba-go/simba/schema"
)

// TestWaitGrantWithoutABell: when nobody holds the bell of whom a waiter
// waits behind (a holder that took the lock without waiting, or a waiter
// still on its way to its bell), WaitGrant returns at once (rang -1) and
// still grants the lock when the row, as it is now, is the waiter's to
// take: free and the waiter first in its queue. So a waiter behind a
// holder without a bell tries the row on its doorbell connection, and
// needs no connection of the pool for it. Otherwise the row is not
// written at all (version unchanged).
func TestWaitGrantWithoutABell(t *testing.T) {
	cases := []struct {
		name  string
		free  bool // the mutex is free (reserved for the head), not H's
		queue []string
		token int64 // the grant, 0 for none
	}{
		{"head of a free lock", true, []string{keyW, keyX}, 6},
		{"head of a held lock", false, []string{keyW}, 0},
		{"second behind a free lock", true, []string{keyX, keyW}, 0},
	}
	for _, d := range pushDoorbells {
		for _, c := range cases {
			t.Run(d.name+"/"+c.name, func(t *testing.T) {
				db := d.open(t, d.migrated(t))
				ph := "?"
				if d.schema == schema.Postgres {
					ph = "$1"
				}
				_, w := grantRigConns(t, db, ph, c.queue) // H holds no bell
				if c.free {
					if _, err := db.ExecContext(t.Context(), "UPDATE simba_mutex SET owner_id = '', ttl_at = 0 WHERE mutex = 'wg'"); err != nil {
						t.Fatal(err)
					}
				}
				before, v0 := wgRowOf(t, db), wgVersion(t, db)
				var rang, token int64
				if d.schema == schema.Postgres {
					got, err := pgdb.New().WaitGrant(t.Context(), w, pgdb.WaitGrantParams{Self: pgBellW, Pred: pgBellH,
						TimeoutMs: 30000, TtlMs: 5000, TransitionMs: 3000, OwnerID: "W", Mutex: "wg", Wkey: keyW})
					if err != nil {
						t.Fatal(err)
					}
					rang, token = got.Rang, got.Token
				} else {
					res, err := mydb.New().WaitGrant(t.Context(), w, mydb.WaitGrantParams{Scope: "simba_mutex", Mutex: []byte("wg"),
						Self: keyW, Pred: keyH, TimeoutS: 30, TtlMs: 5000, TransitionMs: 3000, OwnerID: []byte("W"), Wkey: keyW})
					if err != nil {
						t.Fatal(err)
					}
					n, _ := res.RowsAffected()
					id, _ := res.LastInsertId()
					switch {
					case n == 1:
						rang, token = -1, id
					case id == 13: // 10 + 3 × mine + rang + 1, mine and rang -1
						rang = -1
					default:
						t.Fatalf("WaitGrant: %d rows, insert id %d; want 1 row (a grant) or code 13 (mine, nobody held the bell)", n, id)
					}
				}
				if rang != -1 || token != c.token {
					t.Fatalf("WaitGrant: rang %d, token %d; want rang -1 (nobody held the bell), token %d", rang, token, c.token)
				}
				after := wgRowOf(t, db)
				if c.token == 0 {
					if after != before || wgVersion(t, db) != v0 {
						t.Fatalf("row after a wait that granted nothing: %+v (version %d); want it unchanged: %+v (version %d)",
							after, wgVersion(t, db), before, v0)
					}
					return
				}
				if after.owner != "W" || after.token != c.token || after.ttlAt-after.acquired != 5000 || after.transitionAt-after.ttlAt != 3000 ||
					after.queue != keyX+"9999999999999" {
					t.Fatalf("row after the grant: %+v; want W with token %d, ttl 5000 and transition 3000 ms, X alone queued", after, c.token)
				}
			})
		}
	}
}

// wgVersion reads the version of lock "wg" of a WaitGrant rig.
func wgVersion(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRowContext(t.Context(), "SELECT version FROM simba_mutex WHERE mutex = 'wg'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
