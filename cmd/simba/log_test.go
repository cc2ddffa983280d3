//go:build unix

package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// TestLogLeavesOutWhatSimbaReports (issue 20): the CLI's handler drops
// the library's records of a lost lease by their event attribute (simba
// reports the loss in its own words), and keeps the rest.
func TestLogLeavesOutWhatSimbaReports(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	c := &cli{stderr: &stderr}
	st := memstore.New()
	m, err := lease.NewManager(st, lease.WithContenderID("a"), lease.WithTTL(30*time.Millisecond),
		lease.WithTransition(30*time.Millisecond), lease.WithLogger(c.logger(slog.LevelDebug)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	l, err := m.Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	st.FailContender("a", memstore.FaultFail)
	<-l.Done()
	st.Heal()
	_ = m.Close(context.Background())
	out := stderr.String()
	if !strings.Contains(out, "simba: info: lease acquired event=acquired") ||
		!strings.Contains(out, "simba: warning: renew failed event=renew_failed") {
		t.Errorf("stderr lacks the acquire and the failed renewals:\n%s", out)
	}
	if strings.Contains(out, "event=lost") {
		t.Errorf("stderr shows the library's loss record:\n%s", out)
	}
}
