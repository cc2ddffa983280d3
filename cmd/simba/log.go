//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// logger writes the lease package's warnings (failed renewals, a store
// failing while simba waits) to standard error as "simba: warning: ..."
// lines. Lost leases are left out: simba reports those itself.
func (c *cli) logger() *slog.Logger {
	return slog.New(&warnHandler{w: c.stderr, mu: new(sync.Mutex)})
}

// warnHandler is a slog.Handler that prints records of level Warn and up
// on one line each.
type warnHandler struct {
	w     io.Writer
	mu    *sync.Mutex
	attrs []slog.Attr
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "lease lost") {
		return nil
	}
	var b strings.Builder
	b.WriteString("warning: " + r.Message)
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

func (h *warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnHandler{w: h.w, mu: h.mu, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

func (h *warnHandler) WithGroup(string) slog.Handler { return h }
