// Package backoff computes the pauses between retries of simba-go's
// loops: a base doubled once per failed attempt up to a cap, spread by
// jitter where many processes might otherwise retry in step.
package backoff

import (
	"math/rand/v2"
	"time"
)

// randN returns a random duration in [0, n), n > 0. Tests replace it.
var randN = rand.N[time.Duration]

// Exp returns the pause before retry n (from 0): base doubled n times,
// capped at limit. It does not overflow for any n; n <= 0 gives base
// (capped), and base <= 0 gives 0.
func Exp(base, limit time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for ; n > 0 && d < limit; n-- {
		if d > limit-d {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// UpperHalf returns a random duration in [d/2, d]: retries of many
// processes spread out, and none comes sooner than half the pause. It is
// 0 for d <= 0.
func UpperHalf(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + randN(d-d/2+1)
}

// Plus returns d plus a random duration in [0, j); d itself for j <= 0.
func Plus(d, j time.Duration) time.Duration {
	if j <= 0 {
		return d
	}
	return d + randN(j)
}
