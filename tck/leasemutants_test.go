package tck_test

import (
	"encoding/json"
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
		"_, d := lo, rec.Transition"}}
	stopReleasesEarly = []patch{{"lease/contend.go",
		"l.end(ctx, endRequest{}) // drain",
		"l.end(ctx, endRequest{release: true}) // mutant: release at once"}}
	renewBlocksDeadline = []patch{{"lease/hold.go",
		"\tm.wg.Add(1)\n\tgo func() {\n\t\tdefer m.wg.Done()\n\t\tr := renewal{",
		"\tm.wg.Add(1)\n\tfunc() { // mutant: the renewal runs in the holding loop\n\t\tdefer m.wg.Done()\n\t\tr := renewal{"}}
	deadlineFromReply = []patch{
		{"lease/hold.go", "dl := cfg.deadline(r.sent, r.rec)", "dl := cfg.deadline(clk.Now(), r.rec)"},
		{"lease/slot.go", "deadline := cfg.deadline(sent, rec)", "deadline := cfg.deadline(cfg.clock.Now(), rec)"},
	}
	notHeldRetried = []patch{{"lease/hold.go",
		"case r.err == nil || errors.Is(r.err, ErrNotHeld):",
		"case r.err == nil:"}}
	cancelAfterRelease = []patch{
		{"lease/hold.go", "\tl.cancel(ErrReleased)\n\tswitch {", "\tif !req.release {\n\t\tl.cancel(ErrReleased)\n\t}\n\tswitch {"},
		{"lease/hold.go", "\terr := s.releaseHeld(ctx, l)\n\ts.finish(l, err)", "\terr := s.releaseHeld(ctx, l)\n\tl.cancel(ErrReleased)\n\ts.finish(l, err)"},
	}
)

// buildMutant compiles this package's tests with mu's patches applied into
// a binary in dir, and returns its path.
func buildMutant(t *testing.T, mu mutant, dir string) string {
	t.Helper()
	root := moduleRoot(t)
	files := map[string]string{}
	for _, p := range mu.patches {
		src, ok := files[p.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, p.file))
			if err != nil {
				t.Fatalf("mutant %q: %v", mu.name, err)
			}
			src = string(b)
		}
		if n := strings.Count(src, p.old); n != 1 {
			t.Fatalf("mutation site not found: %s has %d copies of %q, want exactly 1; the lease code changed: point the mutant %q at it again (tck/leasemutants_test.go)",
				p.file, n, p.old, mu.name)
		}
		files[p.file] = strings.Replace(src, p.old, p.new, 1)
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
