package lease

import "runtime"

// goid returns the id of the calling goroutine, parsed from the header of
// its stack trace ("goroutine 42 [running]:"). Go offers no other way to
// tell whether Stop or Close is called from inside one of this package's
// callbacks, where waiting for that callback would deadlock. It costs
// about a microsecond and is used only when a Contender starts and in
// Stop and Close.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
