package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockInBackgroundOfTerminal (issue 21): simba lock NAME & in a shell
// with job control reads its terminal from the background; it is not
// stopped by SIGTTIN (a stopped simba renews nothing) and holds the lock
// until SIGTERM.
func TestLockInBackgroundOfTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	ptm, pts := openPTY(t)
	cmd := exec.Command("sh", "-c", `set -m
"$SIMBA_BIN" lock --store "$STORE" job >"$DIR/token" 2>"$DIR/err" &
echo $! >"$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"
while [ ! -e "$DIR/stop" ]; do sleep 0.05; done`)
	cmd.Env = append(e.vars, "SIMBA_BIN="+bin, "STORE="+sqliteURL(e), "DIR="+e.dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	go func() { // drain the terminal
		buf := make([]byte, 256)
		for {
			if _, err := ptm.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		os.WriteFile(e.path("stop"), nil, 0o600)
		_ = cmd.Wait()
	})
	eventually(t, 20*time.Second, "simba lock prints its token", func() bool { return fileHas(e.path("token"), "\n") })
	b, _ := os.ReadFile(e.path("pid"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // a failed test leaves no holder behind
	state := func() string {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && len(b) > i+2 {
			return string(b[i+2 : i+3])
		}
		return "?"
	}
	for range 10 {
		if s := state(); s == "T" || s == "?" {
			t.Fatalf("simba lock in the background: process state %s (stopped, or gone: %s)", s, readFile(e.path("err")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	oneErrorLine(t, e.run("run", "--store", sqliteURL(e), "--no-wait", "job", "--", "true"), codeBusy)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "simba lock exits on SIGTERM", func() bool { return state() == "?" || state() == "Z" })
	if r := e.run("run", "--store", sqliteURL(e), "--no-wait", "job", "--", "true"); r.code != 0 {
		t.Errorf("after SIGTERM: run --no-wait exit %d, stderr %q", r.code, r.stderr)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
