package tck

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/simba-go/simba/lease"
)

// caseList: a store that lists its held locks (lease.Lister) shows every
// live grant made before the listing began, with its owner and token, and
// no grant released before it began, however small the pages (a grant
// is judged only when it surely outlived the listing); a limit
// that is not positive is refused, not a panic. A store that is no Lister
// passes trivially.
func caseList(e *env) {
	raw := e.client()
	lister, ok := raw.(lease.Lister)
	if !ok {
		e.t.Log("the store is no lease.Lister: nothing to check")
		return
	}
	tag := randHex()
	prefix := "tck/List/" + tag + "/"
	id := "tck-list-" + tag
	ttl, tr := e.ttl, e.transition
	held := map[string]uint64{}
	for _, n := range []string{"a", "b", "c/child", "d"} {
		name := prefix + n
		rec, err := raw.Acquire(e.ctx, name, id, ttl, tr)
		// A store may hold a lock it never saw back for a while (Redis
		// after a restart): wait that out, once.
		if err == nil && rec.OwnerID == "" && rec.Transition > 0 && rec.Transition <= ttl+tr+e.takeover() {
			time.Sleep(rec.Transition)
			rec, err = raw.Acquire(e.ctx, name, id, ttl, tr)
		}
		if err != nil || !rec.Held(id) {
			e.t.Fatalf("Acquire(%q) = %+v, %v; want a grant", name, rec, err)
		}
		held[name] = rec.Token
	}
	released := prefix + "d"
	if err := raw.Release(e.ctx, released, id, held[released]); err != nil {
		e.t.Fatalf("Release(%q): %v", released, err)
	}
	delete(held, released)

	for _, limit := range []int{1, 3, lease.MaxListPage} {
		// Renew every grant first: a listing may take long on a busy
		// server, and only a grant that surely outlived it must appear.
		sent := time.Now()
		for name, token := range held {
			if rec, err := raw.Renew(e.ctx, name, id, token, ttl, tr); err != nil || !rec.Held(id) {
				e.t.Fatalf("Renew(%q) = %+v, %v; want the grant extended", name, rec, err)
			}
		}
		seen := map[string]lease.Record{}
		cursor, pages := "", 0
		for {
			page, next, err := lister.ListPage(e.ctx, cursor, limit)
			if err != nil {
				e.t.Fatalf("ListPage(cursor %q, limit %d): %v", cursor, limit, err)
			}
			for _, nr := range page {
				if strings.HasPrefix(nr.Name, prefix) {
					seen[nr.Name] = nr.Record
				}
			}
			pages++
			if next == "" {
				break
			}
			if next == cursor && len(page) == 0 {
				e.t.Fatalf("ListPage(cursor %q, limit %d) returned no names and the same cursor: the listing never ends", cursor, limit)
			}
			if pages > 1_000_000 {
				e.t.Fatalf("ListPage with limit %d: no end after %d pages", limit, pages)
			}
			cursor = next
		}
		if took := time.Since(sent); took >= ttl {
			e.t.Logf("listing with limit %d took %v, beyond the grants' ttl: their presence is not judged", limit, took)
			continue
		}
		for name, token := range held {
			rec, ok := seen[name]
			switch {
			case !ok:
				e.t.Errorf("listing with limit %d: %q, held since before the listing, is missing", limit, name)
			case rec.OwnerID != id || rec.Token != token:
				e.t.Errorf("listing with limit %d: %q owned by %q with token %d, want %q with token %d",
					limit, name, rec.OwnerID, rec.Token, id, token)
			case rec.TTL <= 0:
				e.t.Errorf("listing with limit %d: %q with time left %v, want a live grant", limit, name, rec.TTL)
			}
		}
		if rec, ok := seen[released]; ok {
			e.t.Errorf("listing with limit %d: %q, released before the listing, is listed: %+v", limit, released, rec)
		}
	}

	for _, limit := range []int{0, -1} {
		var err error
		if perr := e.safely(func(ctx context.Context) error {
			_, _, err = lister.ListPage(ctx, "", limit)
			return nil
		}); perr != nil {
			e.t.Errorf("ListPage with limit %d: %v", limit, perr)
		} else if err == nil {
			e.t.Errorf("ListPage with limit %d: no error, want a refusal", limit)
		} else if !errors.Is(err, lease.ErrInvalidArgument) {
			e.t.Logf("ListPage with limit %d: %v (not lease.ErrInvalidArgument)", limit, err)
		}
	}
	for name, token := range held {
		if err := raw.Release(e.ctx, name, id, token); err != nil {
			e.t.Errorf("Release(%q): %v", name, err)
		}
	}
}
