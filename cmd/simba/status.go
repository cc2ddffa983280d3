//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// statusTimeout bounds simba status as a whole.
const statusTimeout = 30 * time.Second

// lockStatus is one row of simba status, also its JSON form.
type lockStatus struct {
	Lock         string `json:"lock"`
	Owner        string `json:"owner"` // "" when free
	Token        uint64 `json:"token"` // 0 when free
	TTLMs        int64  `json:"ttl_ms"`
	TransitionMs int64  `json:"transition_ms"`
}

// cmdStatus implements simba status.
func (c *cli) cmdStatus(f *flags) error {
	asJSON := &f.json
	names := f.args
	for _, n := range names {
		if err := lease.ValidateName(n); err != nil {
			return fail(codeUsage, "status: %v", err)
		}
	}
	t, err := c.storeTarget(f.store)
	if err != nil {
		return err
	}
	if len(names) == 0 && t.kind != kindSQLite && t.kind != kindPostgres && t.kind != kindMySQL {
		return fail(codeUsage, "status: %s stores cannot list their locks: name them (simba status NAME...)", t.kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	b, err := c.open(ctx, t, timing{ttl: lease.DefaultTTL, transition: lease.DefaultTransition}, forLeases)
	if err != nil {
		return err
	}
	defer b.Close()
	listed := len(names) == 0
	if listed {
		if names, err = heldNames(ctx, b); err != nil {
			return withCode(codeUnavailable, fmt.Errorf("status: %s: %v", b.display, err))
		}
	}
	rows := make([]lockStatus, 0, len(names))
	for _, n := range names {
		r, err := b.store.Get(ctx, n)
		if err != nil {
			return withCode(codeUnavailable, fmt.Errorf("status: %s: %q: %v", b.display, n, err))
		}
		if listed && r.Owner == "" {
			continue // released or lapsed since the listing
		}
		rows = append(rows, lockStatus{Lock: n, Owner: r.Owner, Token: r.Token,
			TTLMs: r.TTL.Milliseconds(), TransitionMs: r.Transition.Milliseconds()})
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return c.statusTable(rows)
}

// statusTable prints rows as an aligned table.
func (c *cli) statusTable(rows []lockStatus) error {
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LOCK\tOWNER\tTOKEN\tTTL\tTRANSITION")
	for _, r := range rows {
		owner, token := r.Owner, fmt.Sprint(r.Token)
		if owner == "" {
			owner, token = "(free)", "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Lock, owner, token, ms(r.TTLMs), ms(r.TransitionMs))
	}
	return w.Flush()
}

// ms formats milliseconds as a duration, "-" for none left.
func ms(n int64) string {
	if n <= 0 {
		return "-"
	}
	return (time.Duration(n) * time.Millisecond).String()
}

// heldNames lists the mutexes of a SQL store with a live grant
// (sqlstore.Store.List; some may have ended since, Get tells).
func heldNames(ctx context.Context, b *backend) ([]string, error) {
	l, ok := b.store.(interface {
		List(context.Context) ([]sqlstore.Grant, error)
	})
	if !ok {
		return nil, fmt.Errorf("%s cannot list its locks", b.kind)
	}
	grants, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(grants))
	for i, g := range grants {
		names[i] = g.Mutex
	}
	return names, nil
}
