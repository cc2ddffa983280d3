package lease_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLeaseImportsOnlyTheMetricAPI (issue 20): the lease package links
// nothing of OpenTelemetry but the metric API (and the attribute package
// its signatures use, with the hash that requires): no SDK, no exporter. And the library module
// requires no SDK, exporter or Prometheus client: those belong to the
// example's own module.
func TestLeaseImportsOnlyTheMetricAPI(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{
		"github.com/simba-go/simba/lease",
		"github.com/simba-go/simba/internal/backoff",
		"go.opentelemetry.io/otel/metric",
		"go.opentelemetry.io/otel/attribute",
		"github.com/cespare/xxhash/v2", // what the attribute package requires
	}
	for _, p := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			ok = ok || p == a || strings.HasPrefix(p, a+"/")
		}
		if !ok {
			t.Errorf("lease depends on %s", p)
		}
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/prometheus/"} {
		if strings.Contains(string(mod), banned) {
			t.Errorf("the library's go.mod requires %s", banned)
		}
	}
}
