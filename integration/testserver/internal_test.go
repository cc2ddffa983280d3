package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeTB records how need ends a test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Skip(args ...any)          { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatal(args ...any)         { f.failed = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(s string, a ...any) { f.failed = fmt.Sprintf(s, a...) }

func TestNeedSkipsOrFailsMissingServers(t *testing.T) {
	missing := fmt.Errorf("wrapped: %w", &MissingError{Server: "redis", Package: "redis-server", Env: EnvRedis, Detail: "redis-server not found"})
	for _, tc := range []struct {
		ci         string
		err        error
		skip, fail bool
	}{
		{"", missing, true, false},
		{"false", missing, true, false},
		{"true", missing, false, true},
		{"1", missing, false, true},
		{"", errors.New("boom"), false, true},
		{"", nil, false, false},
	} {
		t.Setenv("CI", tc.ci)
		f := &fakeTB{}
		need(f, tc.err)
		if (f.skipped != "") != tc.skip || (f.failed != "") != tc.fail {
			t.Errorf("CI=%q err=%v: skipped %q failed %q", tc.ci, tc.err, f.skipped, f.failed)
		}
		if tc.skip && !strings.Contains(f.skipped, "install the Debian package redis-server") {
			t.Errorf("skip message %q does not name the package", f.skipped)
		}
	}
}

func TestDetachedProcessRefusesControl(t *testing.T) {
	e := &Ensemble{}
	p := e.Node(-1)
	for _, f := range []func() error{p.Start, p.Stop, p.Kill, p.Restart, p.Pause, p.Resume} {
		if err := f(); !errors.Is(err, ErrNotControllable) || !strings.Contains(err.Error(), "no ensemble node -1") {
			t.Errorf("got %v", err)
		}
	}
	if p := (&ClusterServer{}).Node(0); !errors.Is(p.Pause(), ErrNotControllable) {
		t.Error("cluster node out of range is controllable")
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	p, err := freePortPair()
	if err != nil || p+10000 > 65535 {
		t.Fatalf("pair %d, %v", p, err)
	}
}

func TestSweepRemovesDirsOfDeadBinaries(t *testing.T) {
	dead := filepath.Join(os.TempDir(), dirPrefix+"999999999-redis-x") // no such pid
	alive := filepath.Join(os.TempDir(), dirPrefix+"1-redis-x")        // pid 1 lives
	ours := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-redis-x", dirPrefix, os.Getpid()))
	for _, d := range []string{dead, alive, ours} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	sweepStale()
	for d, want := range map[string]bool{dead: false, alive: true, ours: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", d, err == nil, want)
		}
	}
}

func TestCopyTreeKeepsModes(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(filepath.Join(src, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src, dst, -1, -1); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dst, "a", "b", "f"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("copied file: %v, %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "a")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("copied dir: %v, %v", st, err)
	}
}

func TestDockerProbeIsQuickAndCached(t *testing.T) {
	begin := time.Now()
	err1 := dockerUsable()
	err2 := dockerUsable()
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("docker probe took %v", took)
	}
	if (err1 == nil) != (err2 == nil) {
		t.Errorf("probe not cached: %v, %v", err1, err2)
	}
	t.Logf("docker usable: %v (probe %v)", err1 == nil, err1)
	t.Setenv(EnvDocker, "0")
	if err := dockerUsable(); err == nil || !strings.Contains(err.Error(), EnvDocker) {
		t.Errorf("%s=0: %v", EnvDocker, err)
	}
}

func TestStartFailsFastOnTakenPort(t *testing.T) {
	bin, err := redisBinary()
	need(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := newRedisProcess(bin, t.TempDir(), ln.Addr().(*net.TCPAddr).Port)
	begin := time.Now()
	err = p.Start()
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("Start on a taken port: %v, want errAddrInUse", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("noticed the exit after %v", took)
	}
	if p.isUp() {
		t.Fatal("process counted as up after a failed start")
	}
}

// TestStartWaitsForASlowServer: a server whose every new connection takes
// longer to answer than the first probe's time limit is ready, not down
// (make chaos, 2026-11-24: "postgres 127.0.0.1:34791 not ready after 1m0s
// (last probe: ... failed to receive message: timeout: context deadline
// exceeded)" while its backends wrote "could not send data to client:
// Broken pipe" for every probe that gave up, at load 20).
func TestStartWaitsForASlowServer(t *testing.T) {
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	const answer = 1500 * time.Millisecond // each connection's answer takes longer than a first probe gets
	var probes atomic.Int32
	p := newProcess("slow", "127.0.0.1:1", procSpec{
		path: bin, args: []string{"600"}, dir: t.TempDir(), logPath: filepath.Join(t.TempDir(), "log"),
		uid: -1, stopSig: syscall.SIGKILL,
		ready: func(ctx context.Context) error {
			probes.Add(1)
			select {
			case <-time.After(answer):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	if err := p.Start(); err != nil {
		t.Fatalf("Start of a server that answers in %v: %v (%d probes)", answer, err, probes.Load())
	}
	defer func() { _ = p.Stop() }()
	t.Logf("ready after %d probes", probes.Load())
}
