package testserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server timing for every ZooKeeper this package starts: a short tick makes
// session-expiry tests fast. Sessions may last 0.5–60 s; the server clamps
// a client's requested timeout into that range.
const (
	zkTickMs           = 250
	zkMinSessionMs     = 2 * zkTickMs
	zkMaxSessionMs     = 60000
	zkDebianJar        = "/usr/share/java/zookeeper.jar"
	zkDebianSLF4JSimpl = "/usr/share/java/slf4j-simple.jar"
)

// ZooKeeperServer is a ZooKeeper for one test, with a znode root of its own.
type ZooKeeperServer struct {
	*Process // Addr (the first server); control methods work for PrivateZooKeeper only
	servers  []string
	root     string
}

// Servers returns the addresses to give zk.Connect.
func (s *ZooKeeperServer) Servers() []string { return s.servers }

// Root returns the test's unique znode path, e.g. "/simba-test-1a2b3c4d5e6f".
// It exists (empty, world ACL) when the helper returns.
func (s *ZooKeeperServer) Root() string { return s.root }

var sharedZooKeeper lazy[*Process]

// ZooKeeper returns a ZooKeeper for the test: the servers named by
// SIMBA_TEST_ZOOKEEPER, else a container when Docker answers, else a local
// standalone ZooKeeper shared by the tests of this binary. Only the znode
// root is the test's own; the server is not controllable (see
// PrivateZooKeeper and ZooKeeperEnsemble).
func ZooKeeper(t testing.TB) *ZooKeeperServer {
	t.Helper()
	if servers := envList(EnvZooKeeper); len(servers) > 0 {
		for _, s := range servers {
			if !hostPort(s) {
				t.Fatalf("testserver: %s: %q is not host:port", EnvZooKeeper, s)
			}
		}
		root := makeRoot(t, servers)
		t.Cleanup(func() { deleteTree(t, servers, root) })
		return &ZooKeeperServer{Process: detached("zookeeper", servers[0], "named by "+EnvZooKeeper), servers: servers, root: root}
	}
	begin := time.Now()
	p, err := sharedZooKeeper.get(func() (*Process, error) {
		return sharedServer("zookeeper", containerSpec{
			image: imageZooKeeper, port: "2181/tcp",
			env: map[string]string{
				"ZOO_TICK_TIME":              strconv.Itoa(zkTickMs),
				"ZOO_CFG_EXTRA":              fmt.Sprintf("minSessionTimeout=%d maxSessionTimeout=%d", zkMinSessionMs, zkMaxSessionMs),
				"ZOO_4LW_COMMANDS_WHITELIST": "*",
				"ZOO_ADMINSERVER_ENABLED":    "false",
			},
			ready: func(ctx context.Context, a string) error { return zkServing(ctx, a) },
		}, func() (*group, error) { return startZooKeeper(defaultZKSettings()) }, "PrivateZooKeeper")
	})
	need(t, err)
	logStart(t, "shared "+p.String(), begin)
	return &ZooKeeperServer{Process: p, servers: []string{p.Addr()}, root: makeRoot(t, []string{p.Addr()})}
}

// A ZooKeeperOption changes the configuration of a [PrivateZooKeeper].
type ZooKeeperOption func(*zkSettings)

// zkSettings are the zoo.cfg values a test may change.
type zkSettings struct {
	maxSessionMs int
	clock        *ServerClock
}

func defaultZKSettings() zkSettings { return zkSettings{maxSessionMs: zkMaxSessionMs} }

// WithMaxSessionTimeout sets the server's maxSessionTimeout (default 60 s):
// it grants no session a longer timeout than d, whatever the client asks.
func WithMaxSessionTimeout(d time.Duration) ZooKeeperOption {
	return func(s *zkSettings) { s.maxSessionMs = max(int(d.Milliseconds()), zkMinSessionMs) }
}

// PrivateZooKeeper starts a local standalone ZooKeeper for this test alone,
// stopped when the test ends. Its control methods work and it keeps its
// data (and sessions, until they expire) across restarts.
func PrivateZooKeeper(t testing.TB, opts ...ZooKeeperOption) *ZooKeeperServer {
	t.Helper()
	begin := time.Now()
	settings := defaultZKSettings()
	for _, o := range opts {
		o(&settings)
	}
	g, err := startZooKeeper(settings)
	need(t, err)
	private(t, g)
	logStart(t, "private "+g.procs[0].String(), begin)
	a := g.procs[0].Addr()
	return &ZooKeeperServer{Process: g.procs[0], servers: []string{a}, root: makeRoot(t, []string{a})}
}

// zkJava returns the java binary and the class path of the Debian package.
func zkJava() (java, classpath string, err error) {
	missing := func(d string) error {
		return &MissingError{Server: "zookeeper", Package: "zookeeper", Env: EnvZooKeeper, Detail: d}
	}
	if !localSupported {
		return "", "", missing("not a Unix system")
	}
	if _, err := os.Stat(zkDebianJar); err != nil {
		return "", "", missing(zkDebianJar + " not found")
	}
	java, ok := lookBinary([]string{"java"}, filepath.Join(os.Getenv("JAVA_HOME"), "bin"), "/usr/bin")
	if !ok {
		return "", "", missing("java not found")
	}
	classpath = zkDebianJar
	if _, err := os.Stat(zkDebianSLF4JSimpl); err == nil {
		classpath += ":" + zkDebianSLF4JSimpl // readable logs instead of SLF4J's no-op warning
	}
	return java, classpath, nil
}

// zkConfig returns the zoo.cfg lines every local ZooKeeper shares.
func zkConfig(dataDir string, clientPort int, settings zkSettings) string {
	return fmt.Sprintf(`tickTime=%d
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
forceSync=no
`, zkTickMs, zkMinSessionMs, settings.maxSessionMs, dataDir, clientPort)
}

// zkProcess describes one ZooKeeper JVM with its config file cfg.
func zkProcess(java, classpath, mainClass, dir, cfg string, clientPort int, ready func(ctx context.Context, a string) error) *Process {
	a := addr(clientPort)
	return newProcess("zookeeper", a, procSpec{
		path: java,
		args: []string{"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:TieredStopAtLevel=1",
			"-Djava.net.preferIPv4Stack=true", "-Dzookeeper.log.dir=" + dir,
			// Cap leader election's back-off (60 s by default): a node that
			// lost its quorum otherwise takes seconds to notice a peer back.
			"-Dzookeeper.fastleader.maxNotificationInterval=1000",
			"-cp", classpath, mainClass, cfg},
		dir: dir, logPath: filepath.Join(dir, "zookeeper.log"),
		uid: -1, gid: -1,
		ready: func(ctx context.Context) error { return ready(ctx, a) },
	})
}

// startZooKeeper starts a standalone ZooKeeper on a free port.
func startZooKeeper(settings zkSettings) (*group, error) {
	java, classpath, err := zkJava()
	if err != nil {
		return nil, err
	}
	dir, err := newWorkDir("zookeeper")
	if err != nil {
		return nil, err
	}
	g := &group{dir: dir}
	err = retryPorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		cfg := filepath.Join(dir, "zoo.cfg")
		if err := os.WriteFile(cfg, []byte(zkConfig(filepath.Join(dir, "data"), port, settings)), 0o644); err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
		p := zkProcess(java, classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", dir, cfg, port, zkServing)
		p.spec.env = clockEnv(settings.clock, false, true, false)
		g.procs = []*Process{p}
		return p.Start()
	})
	if err != nil {
		_ = g.close()
		return nil, err
	}
	return g, nil
}

// zkServing checks that the server serves clients: `srvr` reports a Mode
// (`ruok` answers imok before the server serves).
func zkServing(ctx context.Context, a string) error {
	mode, err := zkMode(ctx, a)
	if err != nil {
		return err
	}
	if mode == "" {
		return fmt.Errorf("zookeeper %s: not serving yet", a)
	}
	return nil
}

// zkMode returns the Mode line of `srvr` ("standalone", "leader",
// "follower"), or "" when the server answers but does not serve.
func zkMode(ctx context.Context, a string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", a)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", nil
}
