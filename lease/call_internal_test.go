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

		c := m.startCall(nil, parent)
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

		c = m.startCall(nil, parent)
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
		c = m.startCall(nil, pctx)
		done = c.Done()
		pcancel()
		<-done
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("after the parent ended, Err %v", c.Err())
		}

		short, scancel := context.WithTimeout(parent, time.Millisecond)
		defer scancel()
		c = m.startCall(nil, short)
		if d, _ := c.Deadline(); d != time.Now().Add(time.Millisecond) {
			t.Errorf("Deadline %v, want the parent's earlier one", d)
		}
		c.end()

		c = m.startCall(nil, parent)
		done = c.Done()
		c.end()
		<-done
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("after end, Err %v", c.Err())
		}
		// Derived contexts follow it.
		c = m.startCall(nil, parent)
		child, ccancel := context.WithCancel(c)
		defer ccancel()
		c.end()
		<-child.Done()
	})
}

// A call that asks for Done after a later call did still ends at its own
// deadline; a parent's cancellation ends only its calls; and once the
// timer was stopped (Close), a new call arms it again.
func TestCallTimerOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Manager{cfg: config{callTimeout: time.Second}}
		early := m.startCall(nil, context.Background())
		time.Sleep(100 * time.Millisecond)
		pctx, pcancel := context.WithCancel(context.Background())
		late := m.startCall(nil, pctx)
		later := m.startCall(nil, context.Background())
		lateDone, laterDone := late.Done(), later.Done()
		earlyDone := early.Done() // after two later calls
		pcancel()
		<-lateDone
		if !errors.Is(late.Err(), context.Canceled) || later.Err() != nil || early.Err() != nil {
			t.Errorf("parent of one call cancelled: Err %v, %v, %v", late.Err(), later.Err(), early.Err())
		}
		time.Sleep(900 * time.Millisecond)
		synctest.Wait()
		select {
		case <-earlyDone:
		default:
			t.Fatal("a call that asked for Done late did not end at its deadline")
		}
		select {
		case <-laterDone:
			t.Fatal("a call ended before its deadline")
		default:
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		<-laterDone

		m.calls.idle()
		if !m.calls.armed.IsZero() {
			t.Error("idle left the timer armed")
		}
		c := m.startCall(nil, context.Background())
		done := c.Done()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("a call made after idle did not end at its deadline")
		}
	})
}

// A Manager whose call timer was made outside a synctest bubble still
// bounds the calls it makes inside one (with a timer of their own: a
// bubble's goroutines may not use a timer made outside it, nor the
// reverse).
func TestCallTimerAcrossBubble(t *testing.T) {
	m := &Manager{cfg: config{callTimeout: 10 * time.Millisecond}}
	c := m.startCall(nil, context.Background())
	_ = c.Done()
	c.end()
	synctest.Test(t, func(t *testing.T) {
		c := m.startCall(nil, context.Background())
		done := c.Done()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("a call in a bubble did not end at its deadline")
		}
	})
	m.calls.idle()
}
