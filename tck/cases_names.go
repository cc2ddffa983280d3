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
	for round := range rounds {
		held := make([]*lease.Lease, len(names))
		for i, n := range names {
			who := m[i>>round&1]
			l, err := who.TryAcquire(e.ctx, n)
			if err != nil {
				e.t.Errorf("round %d: TryAcquire(%q): %v (does it collide with another name?)", round, n, err)
				continue
			}
			held[i] = l
			if l.Name() != n || l.Owner().Mutex != n {
				e.t.Errorf("lease of %q reports Name() %q, Owner().Mutex %q", n, l.Name(), l.Owner().Mutex)
			}
		}
		for i, n := range names {
			if held[i] == nil {
				continue
			}
			want := m[i>>round&1].ID()
			if rec := e.rawGet(raw, n); rec.Owner != want || rec.Token != held[i].Token() {
				e.t.Errorf("round %d: the store has %q owned by %q token %d, want %q token %d",
					round, n, rec.Owner, rec.Token, want, held[i].Token())
			}
		}
		for i, l := range held {
			if l != nil {
				e.release(l)
				if o := e.get(m[0], names[i]); o.ID != "" {
					e.t.Errorf("round %d: %q is held by %q after its release", round, names[i], o.ID)
				}
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

// longID returns a contender id of the maximum length, unique to one run
// through tag, that ends in last: two such ids differ only in their last
// byte.
func longID(tag, last string) string {
	id := "tck-id/" + tag + "/"
	return id + strings.Repeat("x", lease.MaxContenderIDLength-len(id)-len(last)) + last
}

// oddIDs returns valid contender ids that stores must keep apart, unique
// to one run through tag: neighbours differ in case, a trailing space,
// Unicode normalization, a separator, an escape, a suffix that looks like
// a sequence number, or the last byte of an id of the maximum length.
func oddIDs(tag string) []string {
	return []string{
		"tck-id-" + tag,
		"TCK-ID-" + tag,
		"tck-id-" + tag + " ",
		"tck-id-" + tag + "-0000000001",
		"tck/id/" + tag,
		"tck%2Fid%2F" + tag,
		"tck{id}" + tag,
		"tck:id:" + tag,
		"caf\u00e9-" + tag,
		"cafe\u0301-" + tag,
		"ünïcødé-🔒-" + tag,
		"tck\t\r\n" + tag,
		longID(tag, "a"),
		longID(tag, "b"),
	}
}

// caseOddIDs: raw Store calls with odd names and contender ids. Every odd
// name is held at once, each by its own contender with an odd id, and a
// Get of each names its own holder; a store that confuses two names loses
// one of the Acquires. Then one mutex is held by each odd id in turn, and
// every other odd id loses its Acquire and fails to renew or release the
// grant with the holder's token: a store that confuses two ids lets the
// wrong one in.
func caseOddIDs(e *env) {
	raw := e.client()
	tag := randHex()
	names, ids := oddNames(tag), oddIDs(tag)
	for _, id := range ids {
		if err := lease.ValidateContenderID(id); err != nil {
			e.t.Fatalf("tck bug: odd id %q is invalid: %v", id, err)
		}
	}
	owner := func(i int) string { // a distinct odd id for each name
		id := fmt.Sprintf("%d:%s", i, ids[i%len(ids)])
		return id[:min(len(id), lease.MaxContenderIDLength)]
	}
	grants := make([]lease.Record, len(names))
	for i, n := range names {
		rec, err := raw.Acquire(e.ctx, n, owner(i), e.ttl, e.transition)
		if err != nil || rec.Owner != owner(i) {
			e.t.Errorf("Store.Acquire(%q) of a free mutex = %+v, %v (does it collide with another name?)", n, rec, err)
		}
		grants[i] = rec
	}
	for i, n := range names {
		if rec := e.rawGet(raw, n); grants[i].Owner == owner(i) && (rec.Owner != owner(i) || rec.Token != grants[i].Token) {
			e.t.Errorf("Store.Get(%q) = owner %q token %d, want %q token %d", n, rec.Owner, rec.Token, owner(i), grants[i].Token)
		}
	}
	for i, n := range names {
		if grants[i].Owner == owner(i) {
			if err := raw.Release(e.ctx, n, owner(i), grants[i].Token); err != nil {
				e.t.Errorf("Store.Release(%q) by its holder: %v", n, err)
			}
		}
	}

	name := e.name("ids")
	for i, holder := range ids {
		g, err := raw.Acquire(e.ctx, name, holder, e.ttl, e.transition)
		if err != nil || g.Owner != holder {
			e.t.Fatalf("Store.Acquire by %q of a free mutex = %+v, %v", holder, g, err)
		}
		for j, other := range ids {
			if j == i {
				continue
			}
			if rec, err := raw.Acquire(e.ctx, name, other, e.ttl, e.transition); err != nil || rec.Owner != holder || rec.Token != g.Token {
				e.t.Errorf("Store.Acquire by %q while %q holds = %+v, %v; want the holder, token %d", other, holder, rec, err, g.Token)
			}
			if _, err := raw.Renew(e.ctx, name, other, g.Token, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
				e.t.Errorf("Renew by %q of the grant of %q: %v, want ErrNotHeld", other, holder, err)
			}
			if err := raw.Release(e.ctx, name, other, g.Token); !errors.Is(err, lease.ErrNotHeld) {
				e.t.Errorf("Release by %q of the grant of %q: %v, want ErrNotHeld", other, holder, err)
			}
		}
		if rec := e.rawGet(raw, name); rec.Owner != holder || rec.Token != g.Token {
			e.t.Errorf("after the other ids' calls the store has %+v, want %q token %d", rec, holder, g.Token)
		}
		if err := raw.Release(e.ctx, name, holder, g.Token); err != nil {
			e.t.Fatalf("Store.Release by the holder %q: %v", holder, err)
		}
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
