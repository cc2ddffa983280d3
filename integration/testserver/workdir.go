package testserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// dirPrefix starts the name of every temporary directory of a local server;
// the pid of the test binary follows, so stale ones can be swept.
const dirPrefix = "simba-testserver-"

var sweepOnce sync.Once

// newWorkDir creates a temporary directory for one local server (or a group
// of them). Everything a local server writes goes there; it is removed when
// the server is closed. The first call also removes directories left by test
// binaries that died without cleaning up.
func newWorkDir(kind string) (string, error) {
	sweepOnce.Do(sweepStale)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%s-", dirPrefix, os.Getpid(), kind))
	if err != nil {
		return "", fmt.Errorf("testserver: %w", err)
	}
	return dir, nil
}

// sweepStale removes the work directories of test binaries that are gone.
func sweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, m := range matches {
		pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(m), dirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		releaseStaleShm(filepath.Join(m, "data", "postmaster.pid"))
		_ = os.RemoveAll(m)
	}
}

var ports struct {
	sync.Mutex
	given map[int]bool
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now and
// that this process has not handed out before. Another process may still
// take it before the server binds; starts retry on errAddrInUse.
func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("testserver: no free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !ports.given[port] {
			ports.given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("testserver: no free port after 100 tries")
}

// freePortPair returns a free port p such that p+10000 is free too (Redis
// Cluster's bus port).
func freePortPair() (int, error) {
	for range 100 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("testserver: no free port pair after 100 tries")
}

// addr returns 127.0.0.1:port.
func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// unique returns a short random name that starts with a letter.
func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand documents it)
	return prefix + hex.EncodeToString(b)
}

// lookBinary finds the first of names in PATH or in the extra directories
// (Debian puts daemons in /usr/sbin, which a normal user's PATH lacks).
func lookBinary(names []string, extraDirs ...string) (string, bool) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, true
		}
		for _, d := range extraDirs {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p, true
			}
		}
	}
	return "", false
}

// runAs returns the uid and gid to run a server as: -1, -1 (ourselves)
// unless we are root and the server refuses root, then the named system user.
func runAs(refusesRoot bool, name string) (uid, gid int, err error) {
	if !refusesRoot || os.Geteuid() != 0 {
		return -1, -1, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("testserver: running as root needs the %q system user: %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// handOver makes dir usable by uid/gid when the server runs as another user:
// its parents must be traversable (MkdirTemp makes 0700 directories).
func handOver(dir string, uid, gid int) error {
	if uid < 0 {
		return nil
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("testserver: %w", err)
	}
	return nil
}
