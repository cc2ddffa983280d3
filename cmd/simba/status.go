//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba/lease"
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

// statusPage is how many names simba status reads at a time from a store
// that lists a page at a time (lease.Lister).
const statusPage = 500

// cmdStatus implements simba status.
func (c *cli) cmdStatus(f *flags) error {
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
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	b, err := c.open(ctx, t, timing{ttl: lease.DefaultTTL, transition: lease.DefaultTransition}, forLeases)
	if err != nil {
		return err
	}
	defer b.Close()
	out := &statusPrinter{w: c.stdout, json: f.json}
	if len(names) == 0 {
		l, ok := b.store.(lease.Lister)
		if !ok {
			return fail(codeUsage, "status: %s stores cannot list their locks: name them (simba status NAME...)", b.kind)
		}
		return c.statusPages(b, l, out)
	}
	for _, n := range names {
		r, err := b.store.Get(ctx, n)
		if err != nil {
			return withCode(codeUnavailable, fmt.Errorf("status: %s: %q: %v", b.display, n, err))
		}
		out.add(statusRow(n, r))
	}
	return out.end()
}

// statusPages prints every held lock of a store that lists a page at a
// time, each page read within statusTimeout and printed before the next
// is read: a million names never load at once.
func (c *cli) statusPages(b *backend, l lease.Lister, out *statusPrinter) error {
	cursor := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
		page, next, err := l.ListPage(ctx, cursor, statusPage)
		cancel()
		if err != nil {
			return withCode(codeUnavailable, fmt.Errorf("status: %s: %v", b.display, err))
		}
		for _, r := range page {
			out.add(statusRow(r.Name, r.Record))
		}
		if err := out.flush(); err != nil {
			return err
		}
		if next == "" {
			return out.end()
		}
		cursor = next
	}
}

// statusRow is the row of the lock name with record r.
func statusRow(name string, r lease.Record) lockStatus {
	return lockStatus{Lock: name, Owner: r.OwnerID, Token: r.Token,
		TTLMs: r.TTL.Milliseconds(), TransitionMs: r.Transition.Milliseconds()}
}

// statusPrinter prints simba status as a table or a JSON array, a page of
// rows at a time (a table's columns are aligned within a page).
type statusPrinter struct {
	w       io.Writer
	json    bool
	rows    []lockStatus
	started bool // the header or "[" is out
	any     bool // a JSON element is out
}

func (p *statusPrinter) add(r lockStatus) { p.rows = append(p.rows, r) }

// flush prints the rows added since the last flush.
func (p *statusPrinter) flush() error {
	defer func() { p.rows = p.rows[:0] }()
	if p.json {
		var b bytes.Buffer
		for _, r := range p.rows {
			js, err := json.MarshalIndent(r, "  ", "  ")
			if err != nil {
				return withCode(codeSoftware, err)
			}
			b.WriteString(map[bool]string{false: "[\n  ", true: ",\n  "}[p.any])
			b.Write(js)
			p.any = true
		}
		_, err := p.w.Write(b.Bytes())
		return err
	}
	w := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	if !p.started {
		fmt.Fprintln(w, "LOCK\tOWNER\tTOKEN\tTTL\tTRANSITION")
		p.started = true
	}
	for _, r := range p.rows {
		owner, token := r.Owner, fmt.Sprint(r.Token)
		if owner == "" {
			owner, token = "(free)", "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Lock, owner, token, ms(r.TTLMs), ms(r.TransitionMs))
	}
	return w.Flush()
}

// end flushes what is left and closes the JSON array.
func (p *statusPrinter) end() error {
	if err := p.flush(); err != nil {
		return err
	}
	if !p.json {
		return nil
	}
	end := "\n]\n"
	if !p.any {
		end = "[]\n"
	}
	_, err := io.WriteString(p.w, end)
	return err
}

// ms formats milliseconds as a duration, "-" for none left.
func ms(n int64) string {
	if n <= 0 {
		return "-"
	}
	return (time.Duration(n) * time.Millisecond).String()
}
