//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/simba-go/simba/lease"
)

// watchLine is one line of simba watch, also its JSON form.
type watchLine struct {
	Time time.Time `json:"time"`
	lockStatus
}

// cmdWatch implements simba watch: the owner of NAME, then each change,
// until SIGINT or SIGTERM.
func (c *cli) cmdWatch(f *flags) error {
	name, err := oneName(f)
	if err != nil {
		return err
	}
	t, err := c.storeTarget(f.store)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b, err := c.open(ctx, t, timing{ttl: lease.DefaultTTL, transition: lease.DefaultTransition}, forLeases)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := lease.NewManager(b.store, append([]lease.Option{lease.WithLogger(c.logger(slog.LevelWarn))}, b.opts...)...)
	if err != nil {
		return withCode(codeSoftware, fmt.Errorf("watch: %v", err))
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = m.Close(ctx)
	}()
	owners, err := m.Watch(ctx, name)
	if err != nil {
		return withCode(codeUnavailable, fmt.Errorf("watch: %s: %q: %v", b.display, name, err))
	}
	enc := json.NewEncoder(c.stdout)
	first, last := true, lease.Owner{}
	for o := range owners {
		if !first && o.ID == last.ID && o.Token == last.Token {
			continue // the same grant, renewed or read again
		}
		first, last = false, o
		l := watchLine{Time: time.Now().UTC().Truncate(time.Millisecond), lockStatus: lockStatus{Lock: name, Owner: o.ID, Token: o.Token,
			TTLMs: o.TTL.Milliseconds(), TransitionMs: o.Transition.Milliseconds()}}
		if f.json {
			err = enc.Encode(l)
		} else if o.Free() {
			_, err = fmt.Fprintf(c.stdout, "%s %s free\n", l.Time.Format(time.RFC3339Nano), name)
		} else {
			_, err = fmt.Fprintf(c.stdout, "%s %s held by %s token %d\n", l.Time.Format(time.RFC3339Nano), name, o.ID, o.Token)
		}
		if err != nil {
			return withCode(codeSoftware, fmt.Errorf("watch: %v", err))
		}
	}
	return nil
}
