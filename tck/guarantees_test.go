package tck_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the table of guarantees in doc.go")

// section is one part of the guarantees: the clauses of one promise.
type section struct {
	title   string
	clauses []clause
}

func sections() []section {
	return []section{
		{"The Store contract (lease/store.go); mistakes planted in front of memstore:", storeClauses},
		{"The lease protocol, on every store; mistakes planted in package lease:", leaseClauses},
	}
}

// table is the guarantees as the package documentation shows them.
func table() []string {
	var lines []string
	for _, sec := range sections() {
		lines = append(lines, sec.title)
		for _, c := range sec.clauses {
			lines = append(lines, "  "+c.text)
			for _, m := range c.mistakes {
				lines = append(lines, fmt.Sprintf("    - %s: %s", m.name, strings.Join(m.killers, ", ")))
			}
		}
	}
	return lines
}

// TestGuarantees checks the list of guarantees itself: every clause has a
// planted mistake, every mistake at least two killing cases, every patch
// of a lease mistake finds its site exactly once (without building it:
// TestMutants does), and the package documentation (doc.go) shows exactly
// this list. Run with -update to rewrite the documentation's table.
func TestGuarantees(t *testing.T) {
	root := moduleRoot(t)
	names := map[string]bool{}
	for _, sec := range sections() {
		for _, c := range sec.clauses {
			if len(c.mistakes) == 0 {
				t.Errorf("clause %q has no planted mistake", c.text)
			}
			for _, m := range c.mistakes {
				if names[m.name] {
					t.Errorf("two mistakes are named %q", m.name)
				}
				names[m.name] = true
				if planted := btoi(m.store != nil) + btoi(m.open != nil) + btoi(len(m.patches) > 0); planted != 1 {
					t.Errorf("mistake %q must be planted in a store, a harness or the lease sources, and only one", m.name)
				}
				seen := map[string]bool{}
				for _, k := range m.killers {
					seen[k] = true
				}
				if len(seen) < 2 {
					t.Errorf("mistake %q has %d killing cases, want at least 2", m.name, len(seen))
				}
				if _, err := patched(root, m); err != nil {
					t.Error(err)
				}
			}
		}
	}

	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	want := table()
	start := -1
	for i, l := range lines {
		if l == "//\t"+want[0] {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("doc.go has no line %q starting the table of guarantees", "//\t"+want[0])
	}
	end := start
	for end < len(lines) && strings.HasPrefix(lines[end], "//\t") {
		end++
	}
	block := make([]string, len(want))
	for i, l := range want {
		block[i] = "//\t" + l
	}
	if strings.Join(lines[start:end], "\n") == strings.Join(block, "\n") {
		return
	}
	if !*update {
		t.Fatalf("the table of guarantees in doc.go is stale (go test ./tck -run TestGuarantees -update rewrites it); want:\n%s",
			strings.Join(block, "\n"))
	}
	lines = append(lines[:start], append(block, lines[end:]...)...)
	if err := os.WriteFile("doc.go", []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
