package lease

import "time"

// Clock is the monotonic clock a Manager measures deadlines, renewal times
// and retries on. Only differences between readings of Now matter; the wall
// time may be stepped freely. The default uses the time package (and so
// works inside a testing/synctest bubble).
type Clock interface {
	// Now returns the current time. Readings are compared with Sub only.
	Now() time.Time
	// NewTimer returns a timer that fires once, d after now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a [Clock].
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped
	// it. As with time.Timer since Go 1.23, no stale value is left in C.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
