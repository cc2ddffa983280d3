//go:build unix

package main

import (
	"bytes"
	"flag"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runCLI runs simba's main logic in-process with args and no standard
// input, and returns its exit code and output.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, nil, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// TestHelpFromFlags (issue 21): each command's help lists exactly the flags
// it defines, in their order, and mentions no flag it does not define.
func TestHelpFromFlags(t *testing.T) {
	t.Parallel()
	_, top, _ := runCLI("help")
	mention := regexp.MustCompile(`(^|[\s(])(--[a-z][a-z-]*)`)
	for _, d := range commandList {
		if !strings.Contains(top, "simba "+d.name+" ") {
			t.Errorf("simba help does not list %s", d.name)
		}
		c := &cli{}
		var want []string
		defined := map[string]bool{}
		c.newFlags(d.name).VisitAll(func(fl *flag.Flag) {
			want = append(want, "--"+fl.Name)
			defined["--"+fl.Name] = true
		})
		code, help, _ := runCLI("help", d.name)
		if code != 0 {
			t.Fatalf("help %s: exit %d", d.name, code)
		}
		if _, h, _ := runCLI(d.name, "--help"); h != help {
			t.Errorf("simba %s --help differs from simba help %s", d.name, d.name)
		}
		_, section, ok := strings.Cut(help, "\nFlags:\n")
		section, _, _ = strings.Cut(section, "\n\n")
		var listed []string
		for _, l := range strings.Split(section, "\n") {
			if strings.HasPrefix(l, "  --") {
				listed = append(listed, strings.Fields(l)[0])
			}
		}
		if !ok || !slices.Equal(listed, want) {
			t.Errorf("simba help %s lists flags %v, defines %v", d.name, listed, want)
		}
		for _, m := range mention.FindAllStringSubmatch(help, -1) {
			if !defined[m[2]] && m[2] != "--version" {
				t.Errorf("simba help %s mentions %s, which it does not define", d.name, m[2])
			}
		}
	}
	code, script, _ := runCLI("completion", "bash")
	if code != 0 || !strings.Contains(script, "--no-wait") {
		t.Fatalf("completion bash: exit %d, %q", code, script)
	}
	if sh, err := exec.LookPath("bash"); err == nil {
		check := exec.Command(sh, "-n")
		check.Stdin = strings.NewReader(script)
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("bash -n on the completion script: %v: %s", err, out)
		}
	}
	if code, _, stderr := runCLI("completion", "fish"); code != codeUsage || !strings.HasPrefix(stderr, "simba: ") {
		t.Errorf("completion fish: exit %d, stderr %q; want %d", code, stderr, codeUsage)
	}
}
