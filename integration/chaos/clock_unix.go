//go:build unix

package chaos

import (
	"time"

	"golang.org/x/sys/unix"
)

// SystemClock reads the system's monotonic clock (CLOCK_MONOTONIC): one
// clock for every process of the machine, never stepped.
func SystemClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("chaos: CLOCK_MONOTONIC: " + err.Error()) // cannot fail on a unix kernel
	}
	return time.Duration(ts.Nano())
}
