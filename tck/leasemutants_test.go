package tck_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Lease mistakes are planted in a copy of a lease source file, which
// `go test -c -overlay` compiles into a test binary of this package in
// place of the original: no hook in production code. Each patch names an
// exact piece of the current source; when the lease code changes, the
// piece is gone and the mutant fails loudly ("mutation site not found")
// until it is pointed at the new code.

// patch replaces old, which must occur exactly once in file (a path from
// the module root), by new.
type patch struct{ file, old, new string }

var (
	renewAtTTL = []patch{{"lease/timing.go",
		"step := min(c.ttl, deadline.Sub(sent)) / 3",
		"step := min(c.ttl, deadline.Sub(sent))"}}
	noJitter = []patch{{"lease/timing.go",
		"d := rec.Transition + lo + rand.N(jitterLate-lo)",
		"_, d := rand.N(jitterLate-lo), rec.Transition // mutant: no jitter"}}
	// Both of Stop's paths (from outside the callbacks and from inside
	// one) release at once instead of draining.
	stopReleasesEarly = []patch{
		{"lease/contend.go",
			"\t\tif first && l != nil {\n\t\t\tl.drain()\n\t\t}\n\t\treturn nil",
			"\t\tif first && l != nil {\n\t\t\t_ = l.stop(ctx) // mutant: release at once\n\t\t}\n\t\treturn nil"},
		{"lease/contend.go",
			"l.drain() // cancel the leader's ctx, keep renewing",
			"_ = l.stop(ctx) // mutant: release at once"},
	}
	// A single renewal (the mutants' memstore has no RenewMany) is sent
	// from the timers' goroutine itself, which then fires no deadline
	// until the call returns.
	renewBlocksDeadline = []patch{{"lease/renew.go",
		"\tfor _, l := range ls {\n\t\tm.wg.Add(1)\n\t\tgo func() {",
		"\tfor _, l := range ls {\n\t\tm.wg.Add(1)\n\t\tfunc() { // mutant: the renewal runs in the timers' goroutine"}}
	// Every deadline: of a renewal, of an acquire in the caller's
	// goroutine, of an acquire by a worker.
	deadlineFromReply = []patch{
		{"lease/renew.go", "if dl := cfg.deadline(sent, rec); dl.After(l.deadline) {", "if dl := cfg.deadline(cfg.clock.Now(), rec); dl.After(l.deadline) {"},
		{"lease/acquire.go", "deadline := cfg.deadline(sent, rec)", "deadline := cfg.deadline(cfg.clock.Now(), rec)"},
		{"lease/worker.go", "deadline := cfg.deadline(sent, rec)", "deadline := cfg.deadline(cfg.clock.Now(), rec)"},
	}
	notHeldRetried = []patch{{"lease/renew.go",
		"case err == nil || errors.Is(err, ErrNotHeld):",
		"case err == nil && !errors.Is(err, ErrNotHeld): // mutant: ErrNotHeld is retried below"}}
	// Release, Close and Stop all end a held lease through releaseLease.
	cancelAfterRelease = []patch{
		{"lease/end.go", "\tm := s.m\n\tl.cancel(cause)\n\ts.mu.Lock()", "\tm := s.m\n\ts.mu.Lock()"},
		{"lease/end.go", "\terr := s.releaseHeld(ctx, l)\n", "\terr := s.releaseHeld(ctx, l)\n\tl.cancel(cause) // mutant: once the store has released\n"},
	}
)

// buildMutant compiles this package's tests with mu's patches applied into
// a binary in dir, and returns its path.
func buildMutant(t *testing.T, mu mutant, dir string) string {
	t.Helper()
	root := moduleRoot(t)
	files, err := patched(root, mu)
	if err != nil {
		t.Fatal(err)
	}
	replace := map[string]string{}
	for file, src := range files {
		copyPath := filepath.Join(dir, strings.ReplaceAll(file, "/", "_"))
		if err := os.WriteFile(copyPath, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(root, file)] = copyPath
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "mutant.test")
	cmd := exec.CommandContext(t.Context(), goTool(t), "test", "-c", "-o", bin, "-overlay", overlayPath, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the mutant %q does not build (%v): point its patches at the current lease code:\n%s", mu.name, err, out)
	}
	return bin
}

// patched returns the sources of the files mu's patches change, with the
// patches applied, by path from the module root. It fails when a file is
// gone or a patch's old text does not occur exactly once in it (counted
// after the patches before it), or when a patch changes nothing.
func patched(root string, mu mutant) (map[string]string, error) {
	files := map[string]string{}
	for _, p := range mu.patches {
		src, ok := files[p.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, p.file))
			if err != nil {
				return nil, fmt.Errorf("mutation site not found: %v; the lease code changed: point the mutant %q at it again (tck/leasemutants_test.go)",
					err, mu.name)
			}
			src = string(b)
		}
		if n := strings.Count(src, p.old); n != 1 {
			return nil, fmt.Errorf("mutation site not found: %s has %d copies of %q, want exactly 1; the lease code changed: point the mutant %q at it again (tck/leasemutants_test.go)",
				p.file, n, p.old, mu.name)
		}
		if p.old == p.new {
			return nil, fmt.Errorf("mutant %q: a patch of %s changes nothing", mu.name, p.file)
		}
		files[p.file] = strings.Replace(src, p.old, p.new, 1)
	}
	return files, nil
}

// moduleRoot is the directory of go.mod above the package's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// goTool is the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	t.Fatal("the lease mutants need the go command: none in PATH or GOROOT")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
