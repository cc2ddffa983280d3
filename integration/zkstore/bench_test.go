package zkstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// BenchmarkStore counts the requests (round trips) of each Store call:
// an Acquire of a free lock whose znode exists or not yet, a waiter's
// repeated Acquire while the lock is held, its Acquire once its turn has
// come, a Renew and a Release by the holder.
//
//	go test -bench Store -run '^$' ./zkstore/
func BenchmarkStore(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	s := newStore(b, connect(b, srv.Servers(), tckSession), srv.Root())
	other := newStore(b, connect(b, srv.Servers(), tckSession), srv.Root())
	ctx := b.Context()
	const ttl, transition = 10 * time.Second, 6 * time.Second
	var acquires, renews, releases, cold, waits, turns int64
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("bench/%d", i%2)
		t0 := trips(s)
		rec, err := s.Acquire(ctx, name, "a", ttl, transition)
		if err != nil || !rec.Held("a") {
			b.Fatalf("Acquire = %+v, %v", rec, err)
		}
		t1 := trips(s)
		if _, err := s.Renew(ctx, name, "a", rec.Token, ttl, transition); err != nil {
			b.Fatal(err)
		}
		t2 := trips(s)
		if _, err := other.Acquire(ctx, name, "b", ttl, transition); err != nil { // queues
			b.Fatal(err)
		}
		w1 := trips(other)
		if _, err := other.Acquire(ctx, name, "b", ttl, transition); err != nil { // polls
			b.Fatal(err)
		}
		w2 := trips(other)
		t3 := trips(s)
		if err := s.Release(ctx, name, "a", rec.Token); err != nil {
			b.Fatal(err)
		}
		t4 := trips(s)
		next, err := other.Acquire(ctx, name, "b", ttl, transition) // its turn
		if err != nil || !next.Held("b") {
			b.Fatalf("the waiter's Acquire after the release = %+v, %v", next, err)
		}
		turns += trips(other) - w2
		if err := other.Release(ctx, name, "b", next.Token); err != nil {
			b.Fatal(err)
		}
		if i < 2 {
			cold += t1 - t0
		} else {
			acquires += t1 - t0
		}
		renews, releases, waits = renews+t2-t1, releases+t4-t3, waits+(w2-w1)
	}
	n := float64(b.N)
	if b.N > 2 {
		b.ReportMetric(float64(acquires)/float64(b.N-2), "trips/acquire")
	}
	b.ReportMetric(float64(cold)/float64(min(b.N, 2)), "trips/first-acquire")
	b.ReportMetric(float64(waits)/n, "trips/waiter-poll")
	b.ReportMetric(float64(turns)/n, "trips/acquire-on-turn")
	b.ReportMetric(float64(renews)/n, "trips/renew")
	b.ReportMetric(float64(releases)/n, "trips/release")
}

// BenchmarkHandoff measures the time from a holder's Release to the
// grant of a waiter in another Manager, on another session: the release
// deletes the holder's node, the waiter's watch on it fires, and the
// waiter's Acquire claims its own node.
//
//	go test -bench Handoff -run '^$' ./zkstore/
func BenchmarkHandoff(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	ms := [2]*lease.Manager{}
	for i := range ms {
		s := newStore(b, connect(b, srv.Servers(), tckSession), srv.Root())
		m, err := lease.NewManager(s, s.LeaseOptions()...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close(context.Background()) })
		ms[i] = m
	}
	ctx := b.Context()
	const name = "bench/handoff"
	l, err := ms[0].Acquire(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		next := ms[(i+1)%2]
		got := make(chan *lease.Lease, 1)
		go func() {
			nl, err := next.Acquire(ctx, name)
			if err != nil {
				b.Error(err)
			}
			got <- nl
		}()
		time.Sleep(20 * time.Millisecond) // let the waiter queue and watch
		start := time.Now()
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		l = <-got
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	_ = l.Release(ctx)
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50/handoff")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "ms-p90/handoff")
}

// BenchmarkCycle measures an uncontended Acquire and Release through a
// Manager, as an application makes them, and through the Store alone.
//
//	go test -bench Cycle -run '^$' ./zkstore/
func BenchmarkCycle(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	s := newStore(b, connect(b, srv.Servers(), tckSession), srv.Root())
	ctx := b.Context()
	b.Run("Manager", func(b *testing.B) {
		m, err := lease.NewManager(s, s.LeaseOptions()...)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close(ctx)
		before := trips(s)
		for b.Loop() {
			l, err := m.Acquire(ctx, "bench/cycle")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(trips(s)-before)/float64(b.N), "trips/cycle")
	})
	b.Run("Store", func(b *testing.B) {
		for b.Loop() {
			rec, err := s.Acquire(ctx, "bench/cycle-raw", "a", 10*time.Second, 6*time.Second)
			if err != nil || !rec.Held("a") {
				b.Fatal(rec, err)
			}
			if err := s.Release(ctx, "bench/cycle-raw", "a", rec.Token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRotation has K Managers, each in a session of its own, take a
// lock in turn as bench/ scenario (c) does: each locks, unlocks once the
// others wait, and locks again. It reports the gap from an Unlock to the
// next grant and the requests per hand-off (all stores together).
//
//	go test -bench Rotation -run '^$' ./zkstore/
func BenchmarkRotation(b *testing.B) {
	for _, k := range []int{2, 8} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) { rotation(b, k) })
	}
}

func rotation(b *testing.B, k int) {
	srv := testserver.ZooKeeper(b)
	ctx := b.Context()
	name := fmt.Sprintf("bench/rotation/%d", k)
	var stores []*zkstore.Store
	var ms []*lease.Manager
	for range k {
		s := newStore(b, connect(b, srv.Servers(), tckSession), srv.Root())
		m, err := lease.NewManager(s, s.LeaseOptions()...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close(context.Background()) })
		stores, ms = append(stores, s), append(ms, m)
	}
	trips := func() (n int64) {
		for _, s := range stores {
			n += trips(s)
		}
		return n
	}
	type grant struct {
		l  *lease.Lease
		at time.Time
	}
	grants := make(chan grant, k)
	waiting := make(chan int, k)
	for i := range k {
		go func() {
			for ctx.Err() == nil {
				waiting <- i
				l, err := ms[i].Acquire(ctx, name)
				if err != nil {
					return
				}
				grants <- grant{l, time.Now()}
				<-l.Done() // released by the loop below
			}
		}()
	}
	var gaps []time.Duration
	in := 0
	g := <-grants
	before := trips()
	b.ResetTimer()
	for range b.N {
		for in < k { // everyone is in Acquire, the holder again
			<-waiting
			in++
		}
		time.Sleep(time.Millisecond)
		in--
		released := time.Now()
		if err := g.l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		g = <-grants
		gaps = append(gaps, g.at.Sub(released))
	}
	b.StopTimer()
	b.ReportMetric(float64(trips()-before)/float64(b.N), "trips/handoff")
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "ms-p50/gap")
	_ = g.l.Release(ctx)
}
