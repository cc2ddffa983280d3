package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// FuzzValidateName checks that ValidateName never panics, accepts exactly
// the names the package documents (1 to MaxNameLength bytes of valid UTF-8
// without NUL), rejects everything else with ErrInvalidName, and that every
// accepted name really works: a Manager on memstore can take it with
// TryAcquire, release it, and then sees it free.
//
// `go test ./lease/` runs the seed corpus (the f.Add calls below and
// testdata/fuzz/FuzzValidateName); `make fuzz` explores further.
func FuzzValidateName(f *testing.F) {
	for _, seed := range []string{
		"",
		"a",
		" ",
		"orders/42",
		"{x}",
		"{tenant:7}:jobs",
		"a:b",
		"a b",
		"訂單",
		"🚀",
		"👩🏽‍🚀",
		"\ufffd",
		"\U0010ffff",
		"\x7f\x01",
		strings.Repeat("x", lease.MaxNameLength-1),
		strings.Repeat("x", lease.MaxNameLength),
		strings.Repeat("x", lease.MaxNameLength+1),
		strings.Repeat("訂", lease.MaxNameLength/3),   // 255 bytes
		strings.Repeat("訂", lease.MaxNameLength/3+1), // 258 bytes
		strings.Repeat("🚀", 64),                      // 256 bytes
		"\xff",
		"a\xffb",
		"訂"[:2],
		"\xed\xa0\x80", // a UTF-16 surrogate half
		"\xc0\xaf",     // an overlong '/'
		"a\x00b",
		"\x00",
		strings.Repeat("x", lease.MaxNameLength-1) + "\x00",
	} {
		f.Add(seed)
	}

	// One Manager and store for the whole fuzzing process, made on first
	// use.
	var (
		once   sync.Once
		m      *lease.Manager
		mErr   error
		closed bool
	)
	manager := func(t *testing.T) *lease.Manager {
		once.Do(func() { m, mErr = lease.NewManager(memstore.New()) })
		if mErr != nil {
			t.Fatalf("NewManager: %v", mErr)
		}
		if closed {
			t.Fatal("Manager used after cleanup")
		}
		return m
	}
	f.Cleanup(func() {
		if m != nil {
			closed = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.Close(ctx); err != nil {
				f.Errorf("Close: %v", err)
			}
		}
	})

	f.Fuzz(func(t *testing.T, name string) {
		err := lease.ValidateName(name)
		valid := len(name) >= 1 && len(name) <= lease.MaxNameLength &&
			utf8.ValidString(name) && strings.IndexByte(name, 0) < 0
		if !valid {
			if err == nil {
				t.Fatalf("ValidateName(%q) accepted an invalid name (%d bytes)", name, len(name))
			}
			badInputWantOnly(t, "ValidateName", err, lease.ErrInvalidName)
			// The Manager refuses it the same way, before any store call.
			m := manager(t)
			if l, err := m.TryAcquire(context.Background(), name); l != nil || !errors.Is(err, lease.ErrInvalidName) {
				t.Fatalf("TryAcquire(%q) = %v, %v; want ErrInvalidName", name, l, err)
			}
			if _, err := m.Get(context.Background(), name); !errors.Is(err, lease.ErrInvalidName) {
				t.Fatalf("Get(%q) = %v; want ErrInvalidName", name, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("ValidateName(%q) = %v, want nil (%d bytes)", name, err, len(name))
		}

		m := manager(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := m.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", name, err)
		}
		if l.Name() != name || l.Token() == 0 || !l.Held() {
			t.Fatalf("TryAcquire(%q) = lease of %q, token %d, held %v", name, l.Name(), l.Token(), l.Held())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", name, err)
		}
		o, err := m.Get(ctx, name)
		if err != nil {
			t.Fatalf("Get(%q): %v", name, err)
		}
		if !o.Free() || o.Name != name {
			t.Fatalf("Get(%q) after Release = %+v, want it free", name, o)
		}
	})
}
