package chaos

import (
	"errors"
	"fmt"
	"sync"
)

// ErrFenced is returned by a fenced [Register] for a token lower than the
// highest it has accepted.
var ErrFenced = errors.New("chaos: fenced: token below the highest accepted")

// shared marks a token already reported as used by two clients.
const shared = "\x00shared"

// Register is the resource the workload increments with read–sleep–write
// cycles. A fenced register checks the token of every read and write
// against the highest token it has accepted and refuses a lower one (reads
// too: a read with a new token fences off the writes of older holders that
// read before it). An unfenced one takes everything, as a resource whose
// users do not pass tokens, and so measures what they would lose.
type Register struct {
	fenced bool

	mu      sync.Mutex
	value   int
	highest uint64
	ok      int      // accepted writes
	refused int      // refused reads and writes
	order   []uint64 // token of every accepted write, in order
	byToken map[uint64]string
	broken  []Violation
}

// NewRegister returns a register, fenced or not.
func NewRegister(fenced bool) *Register {
	return &Register{fenced: fenced, byToken: map[uint64]string{}}
}

// Read returns the value for the holder of token (client).
func (r *Register) Read(client string, token uint64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(client, token); err != nil {
		return 0, err
	}
	return r.value, nil
}

// Write stores v for the holder of token (client).
func (r *Register) Write(client string, token uint64, v int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.admit(client, token); err != nil {
		return err
	}
	r.value = v
	r.ok++
	r.order = append(r.order, token)
	return nil
}

// admit checks token (fenced only) and that one token is one client's.
// Called with mu held.
func (r *Register) admit(client string, token uint64) error {
	if !r.fenced {
		return nil
	}
	if token < r.highest {
		r.refused++
		return fmt.Errorf("%w: %d < %d", ErrFenced, token, r.highest)
	}
	switch other, ok := r.byToken[token]; {
	case !ok:
		r.byToken[token] = client
	case other != client && other != shared:
		r.broken = append(r.broken, violation("I1", "token %d used by %s and %s", token, other, client))
		r.byToken[token] = shared // reported once
	}
	r.highest = token
	return nil
}

// RegisterStats is what a register saw.
type RegisterStats struct {
	Value    int // the final value
	Accepted int // writes taken
	Refused  int // reads and writes refused by the fence
	// Lost is how many accepted increments the value does not show:
	// Accepted − Value for a register that starts at 0 and is only ever
	// incremented by one.
	Lost int
}

// add sums o into s: the registers of several lanes.
func (s *RegisterStats) add(o RegisterStats) {
	s.Value += o.Value
	s.Accepted += o.Accepted
	s.Refused += o.Refused
	s.Lost += o.Lost
}

// Stats returns what the register saw.
func (r *Register) Stats() RegisterStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RegisterStats{Value: r.value, Accepted: r.ok, Refused: r.refused, Lost: r.ok - r.value}
}

// Check returns the violations of I2 a fenced register shows: a lost
// increment, a write whose token went below an earlier accepted one, a
// token used by two clients (I1).
func (r *Register) Check() []Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fenced {
		return nil
	}
	vs := append([]Violation(nil), r.broken...)
	if lost := r.ok - r.value; lost != 0 {
		vs = append(vs, violation("I2", "%d of %d accepted increments lost", lost, r.ok))
	}
	for i := 1; i < len(r.order); i++ {
		if r.order[i] < r.order[i-1] {
			vs = append(vs, violation("I2", "write %d has token %d after token %d", i, r.order[i], r.order[i-1]))
		}
	}
	return vs
}
