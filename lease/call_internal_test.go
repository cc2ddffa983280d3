package lease

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// A store call's context ends at its deadline, with its parent, or when
// the call returns, and reads like a standard one (Err, Done, Deadline,
// Value, context.Cause), whether or not the store asked for Done first.
func TestCallContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Manager{cfg: config{callTimeout: time.Second}}
		parent := context.WithValue(context.Background(), ctxKey{}, "v")

		c := m.newCall(parent)
		if d, ok := c.Deadline(); !ok || d != time.Now().Add(time.Second) {
			t.Errorf("Deadline %v %v, want now + the call timeout", d, ok)
		}
		if c.Err() != nil || c.Value(ctxKey{}) != "v" {
			t.Errorf("fresh call: Err %v, Value %v", c.Err(), c.Value(ctxKey{}))
		}
		time.Sleep(time.Second)
		if !errors.Is(c.Err(), context.DeadlineExceeded) { // Done never asked
			t.Errorf("after the call timeout, Err %v", c.Err())
		}
		select {
		case <-c.Done():
		default:
			t.Error("Done not closed after the deadline")
		}

		c = m.newCall(parent)
		done := c.Done()
		time.Sleep(time.Second)
		synctest.Wait() // the deadline's timer runs its function in a goroutine
		select {
		case <-done:
		default:
			t.Fatal("Done not closed by the deadline's timer")
		}
		if !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Errorf("Cause %v, want DeadlineExceeded", context.Cause(c))
		}

		pctx, pcancel := context.WithCancel(parent)
		c = m.newCall(pctx)
		done = c.Done()
		pcancel()
		<-done
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("after the parent ended, Err %v", c.Err())
		}

		short, scancel := context.WithTimeout(parent, time.Millisecond)
		defer scancel()
		c = m.newCall(short)
		if d, _ := c.Deadline(); d != time.Now().Add(time.Millisecond) {
			t.Errorf("Deadline %v, want the parent's earlier one", d)
		}
		c.end()

		c = m.newCall(parent)
		done = c.Done()
		c.end()
		<-done
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("after end, Err %v", c.Err())
		}
		// Derived contexts follow it.
		c = m.newCall(parent)
		child, ccancel := context.WithCancel(c)
		defer ccancel()
		c.end()
		<-child.Done()
	})
}
