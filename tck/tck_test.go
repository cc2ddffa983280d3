package tck_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// The suite's own tests: it passes against memstore in real time (the mode
// of real servers: parallel cases, real clocks), and every case named in
// the guarantees fails against the mistake it is meant to catch (mutants,
// each run in child processes). The synctest mode runs in the memstore
// package (TestTCK).

func memBackend(wrap func(*memstore.Store) lease.Store) func(t *testing.T) tck.Backend {
	return func(t *testing.T) tck.Backend {
		s := wrap(memstore.New())
		return tck.Backend{
			Client:      func() lease.Store { return s },
			Partitioned: func() (lease.Store, tck.Partition) { return tck.Cuttable(s) },
		}
	}
}

func TestMemstoreRealTime(t *testing.T) {
	tck.Run(t, tck.Harness{
		Open:         memBackend(func(s *memstore.Store) lease.Store { return s }),
		MultiContend: 3 * time.Second,
		Fair:         true,
	})
}

// mutantEnv names, in a child process, the mutant to run the suite
// against.
const mutantEnv = "TCK_MUTANT"

// reportEnv names a file TestMutants writes its report to (make test
// prints it: go test shows no log of a passing test without -v).
const reportEnv = "SIMBA_TCK_REPORT"

var why = flag.Bool("why", false, "TestMutants logs why each named case failed on each mistake (its first messages)")

// TestMutants runs the suite against every planted mistake, each in a
// child process, in synctest mode, and checks that every case the
// guarantees name for it fails; it prints the guarantees with every case
// that failed. A store mistake runs in this test binary; a lease mistake
// in a binary built with its patches (see buildMutant).
//
// In a child process (the mutant named in the environment) TestMutants
// runs the suite against that mutant instead.
func TestMutants(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		runMutant(t, name)
		return
	}
	var (
		mu     sync.Mutex
		failed = map[string][]string{} // mutant -> cases that failed
	)
	t.Cleanup(func() {
		rep := report(failed)
		t.Log("\n" + rep)
		if path := os.Getenv(reportEnv); path != "" {
			if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
				t.Errorf("writing the report to %s: %v", path, err)
			}
		}
	})
	for _, m := range mutants() {
		t.Run(slug(m.name), func(t *testing.T) {
			t.Parallel()
			bin := os.Args[0]
			if len(m.patches) > 0 {
				bin = buildMutant(t, m, t.TempDir())
			}
			got, msgs := failures(t, bin, m)
			if *why {
				t.Log(reasons(m, msgs))
			}
			killed := 0
			for _, k := range m.killers {
				if slices.Contains(got, k) {
					killed++
				} else {
					t.Errorf("case %s did not fail against the mutant %q", k, m.name)
				}
			}
			if killed < 2 {
				t.Errorf("the mutant %q was killed by %d of the cases named for it, want at least 2", m.name, killed)
			}
			mu.Lock()
			failed[m.name] = got
			mu.Unlock()
		})
	}
}

// mutants lists every planted mistake.
func mutants() []mutant {
	var ms []mutant
	for _, c := range append(slices.Clone(storeClauses), leaseClauses...) {
		ms = append(ms, c.mistakes...)
	}
	return ms
}

// slug turns a mutant's name into a subtest name.
func slug(name string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == ',' || r == '\'' {
			return '_'
		}
		return r
	}, name)
}

// runMutant runs the suite against one mistake, in synctest mode: a store
// mistake in front of memstore, a lease mistake (compiled into this
// binary) against memstore without RenewMany, so that the Manager's
// renewals are single Renew calls (a batched renewal returns when its
// context ends, whatever the store does).
func runMutant(t *testing.T, name string) {
	i := slices.IndexFunc(mutants(), func(m mutant) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("no mutant %q", name)
	}
	m := mutants()[i]
	open, wrap := m.open, m.store
	if wrap == nil { // memstore without RenewMany: renewals through Renew
		wrap = plant(func(*mutantStore) {})
	}
	if open == nil {
		open = memBackend(wrap)
	}
	tck.Run(t, tck.Harness{Open: open, Synctest: true, Fair: true})
}

// result matches the verdict of one case in a child's verbose output.
var result = regexp.MustCompile(`(?m)^\s*--- (FAIL|PASS|SKIP): TestMutants/(\w+) `)

// failures runs the suite in bin against mu in a child process and
// returns the cases that failed, and the messages each case logged. A case
// the child left without a verdict (a panic elsewhere ended it) runs again
// alone.
func failures(t *testing.T, bin string, mu mutant) ([]string, map[string][]string) {
	t.Helper()
	verdicts, out := child(t, bin, mu.name, "^TestMutants$")
	msgs := messages(out)
	for _, k := range mu.killers {
		if _, ok := verdicts[k]; !ok {
			again, more := child(t, bin, mu.name, "^TestMutants$/^"+k+"$")
			verdicts[k] = again[k]
			msgs[k] = messages(more)[k]
			out = append(out, more...)
		}
	}
	var failed []string
	for c, v := range verdicts {
		if v == "FAIL" {
			failed = append(failed, c)
		}
	}
	slices.Sort(failed)
	for _, k := range mu.killers {
		if verdicts[k] != "FAIL" {
			t.Logf("output of the suite against %q:\n%s", mu.name, tail(out, 8000))
			break
		}
	}
	return failed, msgs
}

var (
	// caseLine starts the output of a case in a child's verbose output.
	caseLine = regexp.MustCompile(`^\s*(?:=== (?:RUN|CONT|NAME|PAUSE)|--- (?:FAIL|PASS|SKIP):)\s+TestMutants/(\w+)`)
	// msgLine is a message a case logged ("file.go:12: text").
	msgLine = regexp.MustCompile(`^\s+(\w+\.go:\d+: .*)`)
)

// messages returns the messages of each case in a child's verbose output.
func messages(out []byte) map[string][]string {
	msgs := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		if m := caseLine.FindStringSubmatch(l); m != nil {
			cur = m[1]
		} else if m := msgLine.FindStringSubmatch(l); m != nil && cur != "" {
			msgs[cur] = append(msgs[cur], m[1])
		}
	}
	return msgs
}

// reasons describes why each named case failed on mu: its first messages.
func reasons(mu mutant, msgs map[string][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "why the named cases failed on %q:", mu.name)
	for _, k := range mu.killers {
		ms := msgs[k]
		fmt.Fprintf(&b, "\n  %s:", k)
		for _, m := range ms[:min(len(ms), 3)] {
			fmt.Fprintf(&b, "\n    %s", m)
		}
		if len(ms) > 3 {
			fmt.Fprintf(&b, "\n    (%d more)", len(ms)-3)
		}
	}
	return b.String()
}

// child runs the cases that run matches in bin against the mutant name
// and returns each case's verdict and the output.
func child(t *testing.T, bin, name, run string) (map[string]string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run="+run, "-test.count=1", "-test.v", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), mutantEnv+"="+name)
	out, _ := cmd.CombinedOutput() // failing is what a mutant should make it do
	verdicts := map[string]string{}
	for _, m := range result.FindAllSubmatch(out, -1) {
		verdicts[string(m[2])] = string(m[1])
	}
	return verdicts, out
}

// tail returns the last n bytes of out.
func tail(out []byte, n int) []byte {
	if len(out) <= n {
		return out
	}
	return append([]byte("...\n"), out[len(out)-n:]...)
}

// report prints the guarantees, with every case that failed on each
// mistake: how many, and which (* marks the cases the guarantees name).
// A mistake this run did not plant (go test -run) says so.
func report(failed map[string][]string) string {
	var b strings.Builder
	clauses, planted, run, least := 0, 0, 0, -1
	for _, sec := range sections() {
		for _, c := range sec.clauses {
			clauses++
			for _, m := range c.mistakes {
				planted++
				if got, ok := failed[m.name]; ok {
					run++
					if least < 0 || len(got) < least {
						least = len(got)
					}
				}
			}
		}
	}
	fmt.Fprintf(&b, "What the TCK guarantees: %d clauses, %d planted mistakes (%d run here), each killed by at least %d cases.\n", clauses, planted, run, max(least, 0))
	b.WriteString("Per clause: the mistakes planted against it, and the cases that failed on each (* = named in the guarantees, so checked every run).\n")
	for _, sec := range sections() {
		fmt.Fprintf(&b, "\n%s\n", sec.title)
		for _, c := range sec.clauses {
			fmt.Fprintf(&b, "  %s\n", c.text)
			for _, m := range c.mistakes {
				got, ok := failed[m.name]
				if !ok {
					fmt.Fprintf(&b, "    - %s\n      not run\n", m.name)
					continue
				}
				var names []string
				for _, k := range got {
					if slices.Contains(m.killers, k) {
						k += "*"
					}
					names = append(names, k)
				}
				fmt.Fprintf(&b, "    - %s\n      killed by %d: %s\n", m.name, len(got), strings.Join(names, ", "))
			}
		}
	}
	return b.String()
}
