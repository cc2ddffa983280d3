package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// etcdSessionTTL is the lease of every etcd session, in seconds.
const etcdSessionTTL = 5

// httpClient asks etcd for health, version and metrics without keeping
// connections (and their goroutines) open.
var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// etcdBinary is where Debian's etcd-server package installs etcd.
const etcdBinary = "/usr/bin/etcd"

// startEtcd runs etcd (Debian's etcd-server) as a child process on free
// 127.0.0.1 ports with a data directory in t.TempDir(), waits until it
// answers, and kills it when t ends. It returns the client address and the
// server's version; addr is empty (and the run goes on without etcd) when
// etcd is not installed.
func startEtcd(t testing.TB) (addr, version string) {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		bin = etcdBinary
	}
	if _, err := os.Stat(bin); err != nil {
		t.Logf("no etcd target: etcd is not installed (Debian: apt-get install etcd-server): %v", err)
		return "", ""
	}
	client, peer := freePort(t), freePort(t)
	cu, pu := "http://"+client, "http://"+peer
	dir := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "bench="+pu, "--log-outputs", "stderr", "--logger", "zap")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, err := etcdVersion(client); err == nil {
			return client, v
		} else if time.Now().After(deadline) {
			t.Fatalf("etcd did not answer on %s within 30 s: %v\n%s", client, err, out.String())
		}
		select {
		case <-exited:
			t.Fatalf("etcd exited: %s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// etcdVersion asks etcd for its version once it is healthy.
func etcdVersion(addr string) (string, error) {
	var health struct{ Health string }
	if err := getJSON("http://"+addr+"/health", &health); err != nil {
		return "", err
	}
	if health.Health != "true" {
		return "", fmt.Errorf("health %q", health.Health)
	}
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := getJSON("http://"+addr+"/version", &v); err != nil {
		return "", err
	}
	return v.Server, nil
}

func getJSON(url string, v any) error {
	resp, err := httpClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// etcdTargets returns etcd's clientv3/concurrency Lock on s.Etcd: one
// client and one session (lease TTL etcdSessionTTL) per Client, one Lock
// per Lock, as etcd's documentation shows.
func etcdTargets(s Servers) []Target {
	if s.Etcd == "" {
		return nil
	}
	return []Target{{
		Lib: "etcd Mutex", Backend: "etcd", Takeover: etcdSessionTTL * time.Second,
		Settings: fmt.Sprintf("concurrency.Session TTL %d s (keep-alive every TTL/3), NewMutex per lock", etcdSessionTTL),
		Ops:      func(ctx context.Context) (int64, error) { return etcdOps(ctx, s.Etcd) },
		Open: func(context.Context) (Client, error) {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Etcd}, DialTimeout: 5 * time.Second, Context: context.Background(), Logger: zap.NewNop()})
			if err != nil {
				return nil, err
			}
			sess, err := concurrency.NewSession(c, concurrency.WithTTL(etcdSessionTTL))
			if err != nil {
				return nil, errors.Join(err, c.Close())
			}
			return &etcdClient{c: c, s: sess, prefix: "/" + s.KeyPrefix + "/"}, nil
		},
		OpenShared: func(context.Context) (Client, error) {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Etcd}, DialTimeout: 5 * time.Second, Context: context.Background(), Logger: zap.NewNop()})
			if err != nil {
				return nil, err
			}
			return &etcdSharedClient{c: c, prefix: "/" + s.KeyPrefix + "/"}, nil
		},
	}}
}

// etcdSharedClient is one etcd client for many goroutines. A Session's
// Mutexes on one key would all hold at once (they share the session's
// lease, and so the key), so each Lock takes a session of its own from a
// free list and gives it back at Unlock: as many sessions as locks held at
// once, on one connection.
type etcdSharedClient struct {
	c      *clientv3.Client
	prefix string
	mu     sync.Mutex
	free   []*concurrency.Session
	all    []*concurrency.Session
}

// Lock implements Client.
func (c *etcdSharedClient) Lock(ctx context.Context, key string) (Lock, error) {
	c.mu.Lock()
	var sess *concurrency.Session
	if n := len(c.free); n > 0 {
		sess, c.free = c.free[n-1], c.free[:n-1]
	}
	c.mu.Unlock()
	if sess == nil {
		var err error
		if sess, err = concurrency.NewSession(c.c, concurrency.WithTTL(etcdSessionTTL)); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.all = append(c.all, sess)
		c.mu.Unlock()
	}
	m := concurrency.NewMutex(sess, c.prefix+key)
	if err := m.Lock(ctx); err != nil {
		c.put(sess)
		return nil, err
	}
	return etcdSharedLock{c: c, s: sess, m: m}, nil
}

func (c *etcdSharedClient) put(s *concurrency.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.free = append(c.free, s)
}

// Close implements Client: it revokes every session's lease and closes the
// connection.
func (c *etcdSharedClient) Close() error {
	c.mu.Lock()
	all := c.all
	c.all, c.free = nil, nil
	c.mu.Unlock()
	var err error
	for _, s := range all {
		err = errors.Join(err, s.Close())
	}
	return errors.Join(err, c.c.Close())
}

type etcdSharedLock struct {
	c *etcdSharedClient
	s *concurrency.Session
	m *concurrency.Mutex
}

// Unlock implements Lock: it unlocks and gives the session back.
func (l etcdSharedLock) Unlock(ctx context.Context) error {
	err := l.m.Unlock(ctx)
	l.c.put(l.s)
	return err
}

type etcdClient struct {
	c      *clientv3.Client
	s      *concurrency.Session
	prefix string
}

// Lock implements Client.
func (c *etcdClient) Lock(ctx context.Context, key string) (Lock, error) {
	m := concurrency.NewMutex(c.s, c.prefix+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return etcdLock{m}, nil
}

// Close implements Client: it revokes the session's lease (releasing its
// locks) and closes the connection.
func (c *etcdClient) Close() error {
	return errors.Join(c.s.Close(), c.c.Close())
}

type etcdLock struct{ m *concurrency.Mutex }

// Unlock implements Lock.
func (l etcdLock) Unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// etcdOps sums grpc_server_msg_received_total from etcd's /metrics: every
// request message the server received, unary calls and the messages of
// streams alike (lease keep-alives, watch creations).
func etcdOps(ctx context.Context, addr string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return sumMetric(resp.Body, "grpc_server_msg_received_total")
}

// sumMetric adds the values of every series of the Prometheus metric name.
func sumMetric(r io.Reader, name string) (int64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, err
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	return int64(sum), nil
}
