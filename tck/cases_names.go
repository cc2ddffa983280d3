package tck

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/simba-go/simba/lease"
)

// Names: every valid name works and no two collide (RELIABILITY.md S12);
// invalid ones are refused with ErrInvalidName and never panic.

// oddNames returns valid names that stores must encode with care, unique
// to one run through tag. Neighbours differ in the one detail a careless
// encoding loses: separators, case, trailing space, Unicode normalization,
// a parent and its child path, dot segments, the last or first byte of a
// name of the maximum length.
func oddNames(tag string) []string {
	long := func(first, fill, last string) string {
		body := first + "tck/" + tag + "/"
		for len(body)+len(fill)+len(last) <= lease.MaxNameLength {
			body += fill
		}
		return body + strings.Repeat("x", lease.MaxNameLength-len(body)-len(last)) + last
	}
	return []string{
		"tck/ünïcødé/日本語/" + tag,
		"{" + tag + "}",
		"tck{braces}" + tag,
		"tck}{" + tag,
		"tck/a/b/c/" + tag,
		"/" + tag + "/",
		"tck/" + tag,
		"tck/" + tag + "/child",
		"tck/" + tag + "//child",
		"tck/" + tag + "/./child",
		"tck/" + tag + "/../" + tag,
		"tck:" + tag,
		"tck_" + tag,
		"tck%2F" + tag,
		"TCK/" + tag,
		"tck/" + tag + " ",
		"tck with spaces " + tag,
		"🔒🚀 " + tag,
		"caf\u00e9 " + tag,  // é precomposed (NFC)
		"cafe\u0301 " + tag, // e + combining acute (NFD)
		"tck\t\r\n" + tag,
		"tck*?[]^$|" + tag,
		"tck'\"\\;-- " + tag,
		"tck@@" + tag,
		long("", "x", "a"),
		long("", "x", "b"),
		long("A", "x", "a"),
		long("B", "x", "a"),
		long("", "é", "y"),
	}
}

// caseOddNames: each round holds every odd name at once, split between two
// Managers by one bit of the name's index, so every pair of names is held
// by different Managers in some round; a collision makes a TryAcquire fail
// or a Get name the wrong owner. Then a release hands some of the odd
// names to a waiter promptly, so notifications encode names as keys do.
func caseOddNames(e *env) {
	tag := randHex()
	ids := []string{longID(tag, "a"), longID(tag, "b")} // differ in their last byte only
	m0 := e.manager(e.client(), lease.WithContenderID(ids[0]))
	m1, t1 := e.tappedManager(lease.WithContenderID(ids[1]))
	m := []*lease.Manager{m0, m1}
	raw := e.client()
	names := oddNames(tag)
	for _, n := range names {
		if err := lease.ValidateName(n); err != nil {
			e.t.Fatalf("tck bug: odd name %q is invalid: %v", n, err)
		}
	}
	rounds := bits.Len(uint(len(names) - 1))
	unknown := make([]bool, len(names)) // a TryAcquire of the name had an unknown outcome
	for round := range rounds {
		held := make([]*lease.Lease, len(names))
		for i, n := range names {
			who := m[i>>round&1]
			l, err := who.TryAcquire(e.ctx, n)
			// A call that failed (a timeout on a loaded machine) says
			// nothing of names: the outcome is unknown, and the Manager
			// cleans it up. Only a refusal (ErrNotAcquired) is judged.
			// Once the store shows the name free again, try again.
			for try := 0; err != nil && !errors.Is(err, lease.ErrNotAcquired) && try < 5; try++ {
				e.t.Logf("round %d: TryAcquire(%q): %v; trying again once it is free", round, n, err)
				unknown[i] = true
				e.eventually(e.takeover(), func() bool {
					rec, err := raw.Get(e.ctx, n)
					return err == nil && rec.OwnerID == ""
				})
				l, err = who.TryAcquire(e.ctx, n)
			}
			if err != nil {
				e.t.Errorf("round %d: TryAcquire(%q): %v (does it collide with another name?)", round, n, err)
				continue
			}
			held[i] = l
			if l.Name() != n || l.Owner().Name != n {
				e.t.Errorf("lease of %q reports Name() %q, Owner().Name %q", n, l.Name(), l.Owner().Name)
			}
		}
		for i, n := range names {
			if held[i] == nil {
				continue
			}
			want := m[i>>round&1].ID()
			rec := e.rawGet(raw, n)
			if rec.OwnerID == want && rec.Token == held[i].Token() {
				continue
			}
			// Held after the read: the grant was live all through it.
			if !held[i].Held() {
				e.t.Logf("round %d: %q was lost before the store was read (%v): not judged", round, n, held[i].Err())
				continue
			}
			e.t.Errorf("round %d: the store has %q owned by %q token %d, want %q token %d",
				round, n, rec.OwnerID, rec.Token, want, held[i].Token())
		}
		for i, l := range held {
			if l != nil && !e.releaseUnlessLost(l) {
				e.checkFreedName(m[0], round, names[i], l.Token(), unknown[i])
			}
		}
	}

	for _, n := range []string{names[1], names[0], names[len(names)-1], names[len(names)-5]} {
		l := e.acquire(m[0], n)
		w := e.acquireAsync(e.ctx, m[1], n)
		time.Sleep(e.settle())
		r := e.handOff(l, w, t1, m[1].ID(), fmt.Sprintf("waiter for %q (are wake-ups encoded like the name? are long contender ids kept whole?)", n))
		e.release(r.l)
	}
}

// checkFreedName checks, after the release of the grant of name with
// token, that m finds name free. The released grant still there is a
// failure, and so is any other grant, unless a call for name had an
// unknown outcome (unknown: a TryAcquire that timed out on a loaded
// machine may still have queued a node, and the Manager withdraws it in
// the background) and the name is free again within the takeover bound;
// the log says so, with the tokens.
func (e *env) checkFreedName(m *lease.Manager, round int, name string, token uint64, unknown bool) {
	e.t.Helper()
	o := e.get(m, name)
	switch {
	case o.ID == "":
	case o.Token == token:
		e.t.Errorf("round %d: %q is still granted to %q token %d after its release", round, name, o.ID, o.Token)
	case !unknown:
		e.t.Errorf("round %d: %q is held by %q token %d after the release of token %d (does it collide with another name?)",
			round, name, o.ID, o.Token, token)
	case !e.eventually(e.takeover(), func() bool { return e.get(m, name).ID == "" }):
		e.t.Errorf("round %d: %q is held by %q token %d after the release of token %d, and still %v later",
			round, name, o.ID, o.Token, token, e.takeover())
	default:
		e.t.Logf("round %d: %q was held by %q token %d just after the release of token %d, and free again within %v",
			round, name, o.ID, o.Token, token, e.takeover())
	}
}

// caseInvalidNames: empty, too long, invalid UTF-8 and NUL-carrying names
// are refused with ErrInvalidName by every call that takes a name, at once
// and without a panic.
func caseInvalidNames(e *env) {
	m := e.newManager()
	invalid := map[string]string{
		"empty":                "",
		"MaxNameLength+1":      strings.Repeat("x", lease.MaxNameLength+1),
		"multibyte over limit": strings.Repeat("x", lease.MaxNameLength-1) + "é",
		"invalid UTF-8":        "tck/\xff\xfe",
		"truncated UTF-8":      "tck/\xe6\x97",
		"NUL":                  "tck/\x00/" + randHex(),
	}
	noop := func(context.Context) error { return nil }
	for label, n := range invalid {
		calls := map[string]func(ctx context.Context) error{
			"ValidateName": func(context.Context) error { return lease.ValidateName(n) },
			"Acquire":      func(ctx context.Context) error { _, err := m.Acquire(ctx, n); return err },
			"TryAcquire":   func(ctx context.Context) error { _, err := m.TryAcquire(ctx, n); return err },
			"Get":          func(ctx context.Context) error { _, err := m.Get(ctx, n); return err },
			"Watch":        func(ctx context.Context) error { _, err := m.Watch(ctx, n); return err },
			"Contend": func(context.Context) error {
				c, err := m.Contend(n, lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) {}})
				if c != nil {
					c.Stop(context.Background())
				}
				return err
			},
			"Schedule": func(context.Context) error {
				s, err := lease.Schedule(m, n, lease.FixedDelay(e.ttl), noop)
				if s != nil {
					s.Stop(context.Background())
				}
				return err
			},
		}
		for call, f := range calls {
			if err := e.safely(f); !errors.Is(err, lease.ErrInvalidName) {
				e.t.Errorf("%s with a name that is %s: %v, want ErrInvalidName", call, label, err)
			}
		}
	}
}

// safely runs f with a short deadline and turns a panic into an error.
func (e *env) safely(f func(ctx context.Context) error) (err error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.prompt())
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f(ctx)
}
