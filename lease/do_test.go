package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

var errWork = errors.New("test: the work failed")

func mustBeFree(t *testing.T, st *memstore.Store, name string) {
	t.Helper()
	if rec, err := st.Get(bg, name); err != nil || rec.OwnerID != "" {
		t.Errorf("after Do the store has %+v (%v), want %q free", rec, err, name)
	}
}

// TestDo: Do runs the function under the held lease, with its token,
// releases the lock after it, and returns the function's error as it is.
func TestDo(t *testing.T) {
	st := memstore.New()
	m := newMgr(t, st, "a")
	var token uint64
	err := m.Do(bg, "job", func(ctx context.Context, l *lease.Lease) error {
		token = l.Token()
		if !l.Held() || ctx.Err() != nil {
			t.Errorf("fn runs without the lease: held %v, ctx %v", l.Held(), ctx.Err())
		}
		if rec, _ := st.Get(bg, "job"); rec.OwnerID != "a" || rec.Token != l.Token() {
			t.Errorf("fn runs while the store has %+v", rec)
		}
		return errWork
	})
	if err != errWork {
		t.Errorf("Do returned %v, want fn's error itself", err)
	}
	if token == 0 {
		t.Error("fn did not run")
	}
	mustBeFree(t, st, "job")
	if err := m.Do(bg, "job", func(context.Context, *lease.Lease) error { return nil }); err != nil {
		t.Errorf("Do of a function that succeeds: %v", err)
	}
}

// TestDoLoss: when the lease is lost while fn runs, fn's context is
// cancelled with ErrLost as its cause, and Do returns fn's error joined
// with ErrLost.
func TestDoLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		err := m.Do(bg, "job", func(ctx context.Context, l *lease.Lease) error {
			st.FailContender("a", memstore.FaultFail) // every renewal fails
			<-ctx.Done()
			st.Heal()
			if !errors.Is(context.Cause(ctx), lease.ErrLost) {
				t.Errorf("fn's context ended with cause %v, want ErrLost", context.Cause(ctx))
			}
			return errWork
		})
		if !errors.Is(err, lease.ErrLost) || !errors.Is(err, errWork) {
			t.Errorf("Do returned %v, want fn's error and ErrLost", err)
		}
	})
}

// TestDoCallerCancels: fn's context ends with the caller's, and the lock
// is released all the same.
func TestDoCallerCancels(t *testing.T) {
	st := memstore.New()
	m := newMgr(t, st, "a")
	ctx, cancel := context.WithCancel(bg)
	err := m.Do(ctx, "job", func(fctx context.Context, _ *lease.Lease) error {
		cancel()
		<-fctx.Done()
		return fctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, lease.ErrLost) {
		t.Errorf("Do returned %v, want context.Canceled alone", err)
	}
	mustBeFree(t, st, "job")
}

// TestTryDo: TryDo does not run fn when the lock is held elsewhere.
func TestTryDo(t *testing.T) {
	st := memstore.New()
	holder := newMgr(t, st, "holder")
	l := mustAcquire(t, holder, "job")
	m := newMgr(t, st, "a")
	ran := false
	err := m.TryDo(bg, "job", func(context.Context, *lease.Lease) error { ran = true; return nil })
	if !errors.Is(err, lease.ErrNotAcquired) || ran {
		t.Errorf("TryDo of a held lock: %v (fn ran: %v), want ErrNotAcquired and fn not run", err, ran)
	}
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
	if err := m.TryDo(bg, "job", func(context.Context, *lease.Lease) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("TryDo of a free lock: %v (fn ran: %v)", err, ran)
	}
	mustBeFree(t, st, "job")
}

// TestDoBadInput: a nil function is an invalid argument, not a panic.
func TestDoBadInput(t *testing.T) {
	m := newMgr(t, memstore.New(), "a")
	if err := m.Do(bg, "job", nil); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("Do(nil fn): %v", err)
	}
	if err := m.TryDo(bg, "job", nil); !errors.Is(err, lease.ErrInvalidArgument) {
		t.Errorf("TryDo(nil fn): %v", err)
	}
	if err := m.Do(bg, "", func(context.Context, *lease.Lease) error { return nil }); !errors.Is(err, lease.ErrInvalidName) {
		t.Errorf("Do of an empty name: %v", err)
	}
}

// TestDoPanic: a panicking fn releases the lock before the panic goes on.
func TestDoPanic(t *testing.T) {
	st := memstore.New()
	m := newMgr(t, st, "a")
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the function's panic", p)
			}
		}()
		_ = m.Do(bg, "job", func(context.Context, *lease.Lease) error { panic("boom") })
	}()
	mustBeFree(t, st, "job")
}
