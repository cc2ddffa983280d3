package redisstore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// The grants of the restart and flush tests: a holder believes it holds
// for at most span after it sent its request. The servers have been up
// for longer (see settled).
const (
	holdTTL = time.Second
	holdTr  = 500 * time.Millisecond
	span    = holdTTL + holdTr
)

// grant acquires lock for contender with the restart tests' timings,
// returning the record and when the request was sent.
func grant(t testing.TB, s lease.Store, name, contender string) (lease.Record, time.Time) {
	t.Helper()
	sent := time.Now()
	rec, err := s.Acquire(bg, name, contender, holdTTL, holdTr)
	if err != nil || !rec.Held(contender) {
		t.Fatalf("Acquire(%q, %q) = %+v, %v; want a grant", name, contender, rec, err)
	}
	return rec, sent
}

// notBefore asks for lock as contender every few milliseconds until it is
// granted, and fails when that happens before believed ends: the moment
// until which a holder whose grant the server lost still believes it
// holds. It returns the grant.
func notBefore(t testing.TB, s lease.Store, name, contender string, believed time.Time, holder lease.Record) lease.Record {
	t.Helper()
	for deadline := time.Now().Add(span + 10*time.Second); ; time.Sleep(5 * time.Millisecond) {
		rec, err := s.Acquire(bg, name, contender, holdTTL, holdTr)
		now := time.Now()
		if err == nil && rec.Held(contender) {
			if now.Before(believed) {
				t.Fatalf("%s granted token %d while %s's lost grant (token %d) is believed for %v more",
					contender, rec.Token, holder.OwnerID, holder.Token, believed.Sub(now).Round(time.Millisecond))
			}
			if rec.Token <= holder.Token {
				t.Fatalf("%s's token %d after %s's %d", contender, rec.Token, holder.OwnerID, holder.Token)
			}
			return rec
		}
		if now.After(deadline) {
			t.Fatalf("%s not granted %v after the loss: %+v, %v", contender, span+10*time.Second, rec, err)
		}
	}
}

// TestSnapshotRestartHoldsBack: the lock's record (and counter) is in an
// RDB snapshot, a later grant is not; Redis restarts from the snapshot.
// Nobody is granted the lock while the lost grant's holder may still
// believe it holds.
func TestSnapshotRestartHoldsBack(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	a, _ := grant(t, s, "m", "a")
	if err := s.Release(bg, "m", "a", a.Token); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(bg).Err(); err != nil {
		t.Fatal(err)
	}
	b, sent := grant(t, s, "m", "b")
	if err := srv.Restart(); err != nil { // SIGTERM: no save points, so no new snapshot
		t.Fatal(err)
	}
	notBefore(t, s, "m", "c", sent.Add(span), b)
}

// TestSnapshotRestartWithoutRecordHoldsBack: the snapshot holds another
// lock's grant (so the epoch key is there), not the first grant of "n",
// made later; Redis restarts from the snapshot, "n" has no record at all.
// Nobody is granted "n" while its lost grant's holder may still believe
// it holds (the server is younger than that grant: the fast path of a
// lock without a record must leave it to the full script).
func TestSnapshotRestartWithoutRecordHoldsBack(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	grant(t, s, "other", "a")
	if err := c.Save(bg).Err(); err != nil {
		t.Fatal(err)
	}
	b, sent := grant(t, s, "n", "b")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	notBefore(t, s, "n", "c", sent.Add(span), b)
}

// TestSnapshotRestoredGrantNotReused: the snapshot holds a's grant; a
// released it and b was granted after. Back from the snapshot, a's grant
// is live again: a's next Acquire must not get it back (its token would
// repeat while b believes it holds), and nobody else may be granted
// while b may believe it holds.
func TestSnapshotRestoredGrantNotReused(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	a, _ := grant(t, s, "m", "a")
	if err := c.Save(bg).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(bg, "m", "a", a.Token); err != nil {
		t.Fatal(err)
	}
	b, sent := grant(t, s, "m", "b")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Acquire(bg, "m", "a", holdTTL, holdTr)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Held("a") {
		t.Fatalf("a granted its restored grant (token %d) again while b (token %d) believes it holds", rec.Token, b.Token)
	}
	notBefore(t, s, "m", "a", sent.Add(span), b)
}

// TestAOFRestartHoldsBack: Redis with appendfsync everysec is killed and
// its AOF lost the last writes (what a crash of the machine does within
// the second before an fsync), among them a grant. Nobody is granted the
// lock while that grant's holder may still believe it holds.
func TestAOFRestartHoldsBack(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateRedis(t, testserver.RedisAOF())
	settled(t, srv.Addr())
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	a, _ := grant(t, s, "m", "a")
	if err := s.Release(bg, "m", "a", a.Token); err != nil {
		t.Fatal(err)
	}
	aof := incrAOF(t, srv.Dir())
	waitFor(t, "a's release written to the AOF", func() bool {
		info, err := c.Info(bg, "persistence").Result()
		return err == nil && containsLine(info, "aof_buffer_length:0") && containsLine(info, "aof_pending_bio_fsync:0")
	})
	before := fileSize(t, aof)
	b, sent := grant(t, s, "m", "b")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// The second the crash lost (with everysec, a write waiting for the
	// previous fsync may not even have reached the file).
	if err := os.Truncate(aof, before); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Get(bg, "m"); err != nil || rec.Held("b") {
		t.Fatalf("after the restart: %+v, %v; want b's grant lost", rec, err)
	}
	notBefore(t, s, "m", "c", sent.Add(span), b)
}

// incrAOF finds the incremental AOF file of a Redis 7 server in dir.
func incrAOF(t testing.TB, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "appendonlydir", "*.incr.aof"))
	if err != nil || len(files) != 1 {
		t.Fatalf("incremental AOF files in %s: %v, %v; want one", dir, files, err)
	}
	return files[0]
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestFlushHoldsBack: FLUSHALL, then FLUSHDB, wipe a live grant (and the
// lock's counter) on a server that has been up for long. Nobody is
// granted the lock while the wiped grant's holder may still believe it
// holds.
func TestFlushHoldsBack(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	a, _ := grant(t, s, "m", "a")
	if err := s.Release(bg, "m", "a", a.Token); err != nil {
		t.Fatal(err)
	}
	for _, flush := range []func() *redis.StatusCmd{func() *redis.StatusCmd { return c.FlushAll(bg) }, func() *redis.StatusCmd { return c.FlushDB(bg) }} {
		b, sent := grant(t, s, "m", "b")
		cmd := flush()
		if err := cmd.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", strings.ToUpper(cmd.Name()))
		c := notBefore(t, s, "m", "c", sent.Add(span), b)
		if err := s.Release(bg, "m", "c", c.Token); err != nil {
			t.Fatal(err)
		}
	}
}
