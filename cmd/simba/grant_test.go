//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// shortStore grants every lock for 100ms, whatever it is asked: less than
// any safety margin simba uses, as a store with an unstated limit would.
type shortStore struct{ *memstore.Store }

func (s shortStore) Acquire(ctx context.Context, name, contender string, _, _ time.Duration) (lease.Record, error) {
	return s.Store.Acquire(ctx, name, contender, 100*time.Millisecond, 0)
}

// TestShortGrantExit (issue 14 item 4): a store that grants less than the
// safety margin makes simba run print one line and exit 78 at once,
// instead of hanging while it hammers the store.
func TestShortGrantExit(t *testing.T) {
	t.Parallel()
	m, err := lease.NewManager(shortStore{memstore.New()}, lease.WithTTL(10*time.Second), lease.WithTransition(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	var stderr bytes.Buffer
	c := &cli{stderr: &stderr}
	_, err = c.acquire(m, "job", time.Hour, false, make(chan os.Signal))
	if code := c.exitCode(err); code != codeConfig {
		t.Errorf("exit code %d, want %d", code, codeConfig)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "simba: ") || !strings.Contains(lines[0], "safety margin") {
		t.Errorf("stderr %q, want one line about the safety margin", stderr.String())
	}
}
