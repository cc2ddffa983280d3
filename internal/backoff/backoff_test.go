package backoff

import (
	"math"
	"testing"
	"time"
)

func TestExp(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{50 * ms, 2 * time.Second, 0, 50 * ms},
		{50 * ms, 2 * time.Second, -3, 50 * ms},
		{50 * ms, 2 * time.Second, 1, 100 * ms},
		{50 * ms, 2 * time.Second, 5, 1600 * ms},
		{50 * ms, 2 * time.Second, 6, 2 * time.Second},
		{50 * ms, 2 * time.Second, 1 << 30, 2 * time.Second},
		{10 * ms, time.Second, 7, time.Second},
		{3 * ms, 10 * ms, 1, 6 * ms},
		{3 * ms, 10 * ms, 2, 10 * ms},
		{time.Second, 100 * ms, 0, 100 * ms}, // the cap wins over the base
		{0, time.Second, 3, 0},
		{-ms, time.Second, 3, 0},
		{time.Nanosecond, math.MaxInt64, 62, 1 << 62},
		{time.Nanosecond, math.MaxInt64, 63, math.MaxInt64}, // no overflow
		{time.Nanosecond, math.MaxInt64, 1000, math.MaxInt64},
	} {
		if got := Exp(c.base, c.limit, c.n); got != c.want {
			t.Errorf("Exp(%v, %v, %d) = %v, want %v", c.base, c.limit, c.n, got, c.want)
		}
	}
}

// withRand makes randN return f(n) for the test.
func withRand(t *testing.T, f func(n time.Duration) time.Duration) {
	old := randN
	randN = f
	t.Cleanup(func() { randN = old })
}

func TestJitterBounds(t *testing.T) {
	lowest := func(time.Duration) time.Duration { return 0 }
	highest := func(n time.Duration) time.Duration { return n - 1 }
	for _, d := range []time.Duration{1, 2, 3, 7, time.Millisecond, time.Second + 1} {
		withRand(t, lowest)
		if got := UpperHalf(d); got != d/2 {
			t.Errorf("UpperHalf(%v) with the lowest draw = %v, want %v", d, got, d/2)
		}
		if got := Plus(d, time.Millisecond); got != d {
			t.Errorf("Plus(%v, 1ms) with the lowest draw = %v, want %v", d, got, d)
		}
		withRand(t, highest)
		if got := UpperHalf(d); got != d {
			t.Errorf("UpperHalf(%v) with the highest draw = %v, want %v", d, got, d)
		}
		if got, want := Plus(d, time.Millisecond), d+time.Millisecond-1; got != want {
			t.Errorf("Plus(%v, 1ms) with the highest draw = %v, want %v", d, got, want)
		}
	}
	withRand(t, func(time.Duration) time.Duration { t.Fatal("drew for no jitter"); return 0 })
	for _, d := range []time.Duration{0, -time.Second} {
		if got := UpperHalf(d); got != 0 {
			t.Errorf("UpperHalf(%v) = %v, want 0", d, got)
		}
	}
	if got := Plus(time.Second, 0); got != time.Second {
		t.Errorf("Plus(1s, 0) = %v, want 1s", got)
	}
}
