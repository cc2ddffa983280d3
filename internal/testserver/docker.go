package testserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Environment variables that name the container images. Unset, they are
// the official images a user would pull; .ci/install-docker builds local
// ones from Debian packages and make test-containers points these at them.
const (
	EnvImageRedis     = "SIMBA_TEST_IMAGE_REDIS"     // default redis:7 (also Redis Cluster)
	EnvImagePostgres  = "SIMBA_TEST_IMAGE_POSTGRES"  // default postgres:15
	EnvImageMySQL     = "SIMBA_TEST_IMAGE_MYSQL"     // default mariadb:10.11
	EnvImageZooKeeper = "SIMBA_TEST_IMAGE_ZOOKEEPER" // default zookeeper:3.8
)

// Container images used when a Docker engine answers (read once, when the
// test binary starts).
var (
	imageRedis     = envOr(EnvImageRedis, "redis:7")
	imagePostgres  = envOr(EnvImagePostgres, "postgres:15")
	imageMySQL     = envOr(EnvImageMySQL, "mariadb:10.11")
	imageZooKeeper = envOr(EnvImageZooKeeper, "zookeeper:3.8")
)

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// dockerMode is what SIMBA_TEST_DOCKER asks for.
type dockerMode int

const (
	dockerAuto     dockerMode = iota // unset: containers when an engine answers, else local servers
	dockerOff                        // false: never containers
	dockerRequired                   // true: containers only, never local servers
)

func containerMode() dockerMode {
	v, err := strconv.ParseBool(os.Getenv(EnvDocker))
	switch {
	case err != nil:
		return dockerAuto
	case v:
		return dockerRequired
	default:
		return dockerOff
	}
}

var dockerProbe struct {
	once sync.Once
	err  error
}

// dockerUsable reports (once per process) whether the container provider
// can be used: not disabled by SIMBA_TEST_DOCKER and the engine answers
// testcontainers' health check. Without an engine this takes microseconds.
//
// Before testcontainers reads its configuration it sets, unless the
// environment already does: TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 for a
// local engine (inside a container testcontainers would otherwise take the
// default gateway for the Docker host and send its probes there) and
// TESTCONTAINERS_RYUK_DISABLED=true (the reaper image needs a registry;
// this package removes its containers itself, see reaper.go).
func dockerUsable() error {
	if containerMode() == dockerOff {
		return fmt.Errorf("testserver: containers disabled by %s=%s", EnvDocker, os.Getenv(EnvDocker))
	}
	dockerProbe.once.Do(func() {
		defer func() {
			if r := recover(); r != nil { // testcontainers may panic without an engine
				dockerProbe.err = fmt.Errorf("testserver: docker provider: %v", r)
			}
		}()
		if localEngine() {
			setDefaultEnv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
		}
		setDefaultEnv("TESTCONTAINERS_RYUK_DISABLED", "true") // "true" exactly: testcontainers ignores "1"
		provider, err := testcontainers.ProviderDocker.GetProvider()
		if err != nil {
			dockerProbe.err = fmt.Errorf("testserver: docker provider: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := provider.Health(ctx); err != nil { // closes the provider
			dockerProbe.err = fmt.Errorf("testserver: docker engine: %w", err)
		}
	})
	return dockerProbe.err
}

func setDefaultEnv(name, value string) {
	if os.Getenv(name) == "" {
		_ = os.Setenv(name, value)
	}
}

// localEngine reports whether the Docker engine runs on this machine (no
// DOCKER_HOST, or a Unix socket), so published ports can be bound to
// 127.0.0.1 only.
func localEngine() bool {
	h := os.Getenv("DOCKER_HOST")
	return h == "" || strings.HasPrefix(h, "unix://")
}

// containerSpec says how to run one server image.
type containerSpec struct {
	image string
	port  string // "6379/tcp"
	env   map[string]string
	cmd   []string // replaces the image's command when not empty
	ready func(ctx context.Context, addr string) error
	// fixedPorts publishes these container ports on the same host port
	// numbers (which must be free) instead of port on a random one.
	fixedPorts []int
	what       string // what the container serves, for the log when not obvious from image
}

// runningContainer is a container this package started.
type runningContainer struct {
	image, id string
	endpoint  string // 127.0.0.1:port of spec.port, or of the first fixed port
	c         *testcontainers.DockerContainer
}

// describe names a server in the container, for [Process.String]:
// "redis (container redis:7 1a2b3c4d5e6f)".
func (r *runningContainer) describe(server string) string {
	return server + " (container " + r.image + " " + r.id + ")"
}

// terminate removes the container (nil-safe) and logs it.
func (r *runningContainer) terminate() error {
	if r.c == nil {
		return nil
	}
	err := testcontainers.TerminateContainer(r.c)
	if err == nil {
		fmt.Fprintf(os.Stderr, "testserver: removed container %s (%s)\n", r.id, r.image)
	}
	return err
}

// runContainer starts the image, waits until the server serves, and
// returns the running container. The container carries this process's
// reaper label: it is removed by terminate, by Shutdown, or by the reaper
// when the test binary dies.
func runContainer(spec containerSpec) (*runningContainer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // includes pulling the image
	defer cancel()
	label, err := startReaper()
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithEnv(spec.env),
		testcontainers.WithLabels(map[string]string{reaperLabel: label}),
	}
	probePort := spec.port
	var bindings network.PortMap
	if len(spec.fixedPorts) > 0 {
		if !localEngine() {
			return nil, fmt.Errorf("testserver: container %s: fixed ports need a local Docker engine (DOCKER_HOST=%s)", spec.image, os.Getenv("DOCKER_HOST"))
		}
		bindings = network.PortMap{}
		var exposed []string
		for _, p := range spec.fixedPorts {
			port := network.MustParsePort(strconv.Itoa(p) + "/tcp")
			exposed = append(exposed, port.String())
			bindings[port] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(p)}}
		}
		probePort = exposed[0]
		opts = append(opts, testcontainers.WithExposedPorts(exposed...))
	} else {
		opts = append(opts, testcontainers.WithExposedPorts(spec.port))
		if localEngine() {
			port := network.MustParsePort(spec.port)
			bindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: "0"}}}
		}
	}
	opts = append(opts, testcontainers.WithWaitStrategy(wait.ForListeningPort(probePort).WithStartupTimeout(3*time.Minute)))
	if bindings != nil {
		opts = append(opts, testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.PortBindings = bindings }))
	}
	if len(spec.cmd) > 0 {
		opts = append(opts, testcontainers.WithCmd(spec.cmd...))
	}
	c, err := testcontainers.Run(ctx, spec.image, opts...)
	r := &runningContainer{image: spec.image, c: c}
	if c != nil {
		r.id = shortID(c.GetContainerID())
	}
	if err != nil {
		_ = r.terminate()
		return nil, fmt.Errorf("testserver: container %s: %w", spec.image, err)
	}
	endpoint, err := c.PortEndpoint(ctx, probePort, "")
	if err != nil {
		_ = r.terminate()
		return nil, fmt.Errorf("testserver: container %s: %w", spec.image, err)
	}
	r.endpoint = strings.Replace(endpoint, "localhost:", "127.0.0.1:", 1)
	for {
		probe, cancelProbe := context.WithTimeout(ctx, 2*time.Second)
		err = spec.ready(probe, r.endpoint)
		cancelProbe()
		if err == nil {
			what := ""
			if spec.what != "" {
				what = " for " + spec.what
			}
			fmt.Fprintf(os.Stderr, "testserver: started container %s (%s)%s at %s in %v\n",
				r.id, r.image, what, r.endpoint, time.Since(begin).Round(time.Millisecond))
			return r, nil
		}
		select {
		case <-ctx.Done():
			_ = r.terminate()
			return nil, fmt.Errorf("testserver: container %s not ready: %w", spec.image, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func shortID(id string) string { return id[:min(len(id), 12)] }

// viaContainer starts a shared server in a container when Docker is usable
// and registers its removal with Shutdown. It returns ok == false, and a
// note for the log, when Docker is not usable.
func viaContainer(spec containerSpec) (r *runningContainer, note string, ok bool, err error) {
	if derr := dockerUsable(); derr != nil {
		return nil, derr.Error(), false, nil
	}
	r, err = runContainer(spec)
	if err != nil {
		return nil, "", false, err
	}
	onShutdown(r.terminate)
	return r, "", true, nil
}

// dockerMissing is the error of a helper that must use a container
// (SIMBA_TEST_DOCKER=1) when Docker is not usable.
func dockerMissing(server, why string) error {
	return &MissingError{Server: server, Package: "docker.io", Env: EnvDocker, Script: ".ci/install-docker",
		Detail: EnvDocker + "=" + os.Getenv(EnvDocker) + " asks for a container, but " + why}
}
