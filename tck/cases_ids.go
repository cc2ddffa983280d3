package tck

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
)

// Contender ids: every valid id works and no two are confused (the Store
// contract: a Store must accept every valid id and never confuse two).

// longID returns a contender id of the maximum length, unique to one run
// through tag, that ends in last: two such ids differ only in their last
// byte.
func longID(tag, last string) string {
	id := "tck-id/" + tag + "/"
	return id + strings.Repeat("x", lease.MaxContenderIDLength-len(id)-len(last)) + last
}

// oddIDPairs returns pairs of valid contender ids, unique to one run
// through tag, that differ in the one detail a careless store loses: case,
// a trailing space, a suffix that looks like a sequence number, a
// separator against its escape, Unicode normalization, the last byte of an
// id of the maximum length.
func oddIDPairs(tag string) [][2]string {
	id := "tck-id-" + tag
	return [][2]string{
		{id, "TCK-ID-" + tag},
		{id, id + " "},
		{id, id + "-0000000001"},
		{"tck/id/" + tag, "tck%2Fid%2F" + tag},
		{"tck{id}:" + tag, "tck{id}%3A" + tag},
		{"caf\u00e9-" + tag, "cafe\u0301-" + tag},
		{"ünïcødé-🔒\t\r\n" + tag, "ünïcødé-🔒 " + tag},
		{longID(tag, "a"), longID(tag, "b")},
	}
}

// caseOddIDs: raw Store calls with odd names and contender ids. Every odd
// name is held at once, each by its own contender with an odd id, and a
// Get of each names its own holder; a store that confuses two names loses
// one of the Acquires. Then, for each pair of ids that differ in one
// detail, each of the two holds a lock in turn while the other loses its
// Acquire and fails to renew or release the grant with the holder's token:
// a store that confuses the two lets the wrong one in.
//
// Nobody renews the grants of the odd names: their Acquires, then their
// Gets, then their Releases are sent all at once, since one after another
// they take longer than a grant on a loaded server (1.5 s on a ZooKeeper
// ensemble under -race). A Get or a holder's Release answered after the
// grant may have lapsed is not judged.
func caseOddIDs(e *env) {
	raw := e.client()
	tag := randHex()
	names, pairs := oddNames(tag), oddIDPairs(tag)
	var ids []string
	for _, p := range pairs {
		for _, id := range p {
			if err := lease.ValidateContenderID(id); err != nil {
				e.t.Fatalf("tck bug: odd id %q is invalid: %v", id, err)
			}
		}
		ids = append(ids, p[1])
	}
	owner := func(i int) string { // a distinct odd id for each name
		id := fmt.Sprintf("%d:%s", i, ids[i%len(ids)])
		return id[:min(len(id), lease.MaxContenderIDLength)]
	}
	n := len(names)
	grants, reads, sent := make([]lease.Record, n), make([]lease.Record, n), make([]time.Time, n)
	aerr, gerr, rerr := make([]error, n), make([]error, n), make([]error, n)
	read, released := make([]time.Time, n), make([]time.Time, n) // when answered
	held := func(i int) bool { return aerr[i] == nil && grants[i].OwnerID == owner(i) }
	all(n, func(i int) {
		sent[i] = time.Now()
		grants[i], aerr[i] = raw.Acquire(e.ctx, names[i], owner(i), e.ttl, e.transition)
	})
	all(n, func(i int) {
		if held(i) {
			reads[i], gerr[i] = raw.Get(e.ctx, names[i])
			read[i] = time.Now()
		}
	})
	all(n, func(i int) {
		if held(i) {
			rerr[i] = raw.Release(e.ctx, names[i], owner(i), grants[i].Token)
			released[i] = time.Now()
		}
	})
	for i, name := range names {
		if !held(i) {
			e.t.Errorf("Store.Acquire(%q) of a free lock = %+v, %v (does it collide with another name?)", name, grants[i], aerr[i])
			continue
		}
		lapse := sent[i].Add(e.ttl + e.transition) // the grant lives until then at least
		switch {
		case gerr[i] == nil && reads[i].OwnerID == owner(i) && reads[i].Token == grants[i].Token:
		case read[i].After(lapse):
			e.t.Logf("Store.Get(%q) was answered %v after its grant could lapse: not judged", name, read[i].Sub(lapse))
		default:
			e.t.Errorf("Store.Get(%q) = owner %q token %d, %v; want %q token %d", name, reads[i].OwnerID, reads[i].Token, gerr[i], owner(i), grants[i].Token)
		}
		switch {
		case rerr[i] == nil:
		case released[i].After(lapse):
			e.t.Logf("Store.Release(%q) by its holder was answered %v after its grant could lapse (%v): not judged", name, released[i].Sub(lapse), rerr[i])
		default:
			e.t.Errorf("Store.Release(%q) by its holder: %v", name, rerr[i])
		}
	}

	name := e.name("ids")
	for _, p := range pairs {
		for k := range 2 {
			e.keptApart(raw, name, p[k], p[1-k])
		}
	}
}

// keptApart has holder take name, then checks that other, an id a
// careless store confuses with holder's, neither takes, renews nor
// releases holder's grant; then holder releases it.
func (e *env) keptApart(raw lease.Store, name, holder, other string) {
	e.t.Helper()
	g, err := raw.Acquire(e.ctx, name, holder, e.ttl, e.transition)
	if err != nil || g.OwnerID != holder {
		e.t.Fatalf("Store.Acquire by %q of a free lock = %+v, %v", holder, g, err)
	}
	if rec, err := raw.Acquire(e.ctx, name, other, e.ttl, e.transition); err != nil || rec.OwnerID != holder || rec.Token != g.Token {
		e.t.Errorf("Store.Acquire by %q while %q holds = %+v, %v; want the holder, token %d", other, holder, rec, err, g.Token)
	}
	if _, err := raw.Renew(e.ctx, name, other, g.Token, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Renew by %q of the grant of %q: %v, want ErrNotHeld", other, holder, err)
	}
	if err := raw.Release(e.ctx, name, other, g.Token); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Release by %q of the grant of %q: %v, want ErrNotHeld", other, holder, err)
	}
	if rec := e.rawGet(raw, name); rec.OwnerID != holder || rec.Token != g.Token {
		e.t.Errorf("after calls by %q the store has %+v, want %q token %d", other, rec, holder, g.Token)
	}
	if err := raw.Release(e.ctx, name, holder, g.Token); err != nil {
		e.t.Fatalf("Store.Release by the holder %q: %v", holder, err)
	}
}

// all runs f(0), ..., f(n-1) at once and waits for them to return.
func all(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}
