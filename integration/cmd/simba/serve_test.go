//go:build unix

package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRunServesMetricsAndHealth (issue 20): simba run --listen serves
// /healthz and /metrics (Prometheus text) while it holds the lock, and
// --log-level info shows the library's lifecycle records.
func TestRunServesMetricsAndHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.vars = append(e.vars, "DIR="+e.dir)
	p := e.start("run", "--listen", "127.0.0.1:0", "--log-level", "info", "--ttl", "1s", "--transition", "1s",
		"job", "--", "sh", "-c", `while [ ! -e "$DIR/quit" ]; do sleep 0.02; done`)
	addrRE := regexp.MustCompile(`serving /metrics and /healthz address=(127\.0\.0\.1:\d+)`)
	var addr string
	eventually(t, 30*time.Second, "simba says where it serves", func() bool {
		m := addrRE.FindStringSubmatch(p.stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	eventually(t, 30*time.Second, "the lock is held and renewed", func() bool {
		_, body := get(t, "http://"+addr+"/metrics")
		return strings.Contains(body, "\nsimba_lease_held 1\n") &&
			regexp.MustCompile(`\nsimba_lease_renewals_total [1-9]`).MatchString(body)
	})
	if code, body := get(t, "http://"+addr+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	_, body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		"# TYPE simba_lease_acquire_duration_seconds histogram\n",
		`simba_lease_acquire_duration_seconds_count{simba_kind="acquire",simba_outcome="acquired"} 1` + "\n",
		`simba_lease_store_duration_seconds_count{simba_operation="acquire",simba_outcome="ok"} 1` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if err := os.WriteFile(e.path("quit"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t, 10*time.Second)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"simba: info: lease acquired event=acquired lock=job token=1", "simba: info: lease released event=released lock=job token=1"} {
		if !strings.Contains(r.stderr, want+"\n") {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	r = e.run("run", "--log-level", "loud", "job", "--", "true")
	oneErrorLine(t, r, codeUsage)
	r = e.run("run", "--listen", "127.0.0.1:notaport", "job", "--", "true")
	oneErrorLine(t, r, codeUsage)
}
