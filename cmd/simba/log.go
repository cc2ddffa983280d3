//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/simba-go/simba/lease"
)

// logger writes the lease package's records of level and up to standard
// error, one line each: "simba: warning: renew failed event=renew_failed
// lock=job ...". Records of events that simba reports in its own words
// (a lost lease, leadership gained and lost) are left out, whatever the
// level: they are told apart by their event attribute, never by their
// message.
func (c *cli) logger(level slog.Leveler) *slog.Logger {
	return slog.New(&lineHandler{w: c.stderr, level: level, mu: new(sync.Mutex)})
}

// reported are the events simba reports itself.
var reported = map[string]bool{
	lease.EventLost:         true,
	lease.EventLeaderGained: true,
	lease.EventLeaderLost:   true,
}

// lineHandler is a slog.Handler that prints records on one line each.
type lineHandler struct {
	w     io.Writer
	level slog.Leveler
	mu    *sync.Mutex
	attrs []slog.Attr
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	skip := false
	r.Attrs(func(a slog.Attr) bool {
		skip = a.Key == lease.LogKeyEvent && reported[a.Value.String()]
		return !skip
	})
	if skip {
		return nil
	}
	var b strings.Builder
	b.WriteString(levelWord(r.Level) + ": " + r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintln(h.w, "simba: "+oneLine(b.String()))
	return err
}

// levelWord names a level in simba's lines.
func levelWord(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warning"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &lineHandler{w: h.w, level: h.level, mu: h.mu, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
