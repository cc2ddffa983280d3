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

// Container images used when a Docker engine answers.
const (
	imageRedis     = "redis:7-alpine"
	imagePostgres  = "postgres:16-alpine"
	imageMySQL     = "mysql:8.4"
	imageZooKeeper = "zookeeper:3.8"
)

var dockerProbe struct {
	once sync.Once
	err  error
}

// dockerUsable reports (once per process) whether the container provider
// can be used: not disabled by SIMBA_TEST_DOCKER and the engine answers
// testcontainers' health check. Without an engine this takes microseconds.
func dockerUsable() error {
	if v, err := strconv.ParseBool(os.Getenv(EnvDocker)); err == nil && !v {
		return fmt.Errorf("testserver: containers disabled by %s=%s", EnvDocker, os.Getenv(EnvDocker))
	}
	dockerProbe.once.Do(func() {
		defer func() {
			if r := recover(); r != nil { // testcontainers may panic without an engine
				dockerProbe.err = fmt.Errorf("testserver: docker provider: %v", r)
			}
		}()
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

// containerSpec says how to run one server image.
type containerSpec struct {
	image string
	port  string // "6379/tcp"
	env   map[string]string
	cmd   []string // replaces the image's command when not empty
	ready func(ctx context.Context, addr string) error
}

// runContainer starts the image, waits until the server serves, and
// returns its address and a function that removes the container. The
// container is also removed by testcontainers' reaper when the test binary
// exits.
func runContainer(spec containerSpec) (string, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // includes pulling the image
	defer cancel()
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(spec.port),
		testcontainers.WithEnv(spec.env),
		testcontainers.WithWaitStrategy(wait.ForListeningPort(spec.port).WithStartupTimeout(3 * time.Minute)),
	}
	if len(spec.cmd) > 0 {
		opts = append(opts, testcontainers.WithCmd(spec.cmd...))
	}
	if localEngine() {
		port := network.MustParsePort(spec.port)
		opts = append(opts, testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: "0"}}}
		}))
	}
	c, err := testcontainers.Run(ctx, spec.image, opts...)
	terminate := func() error { return testcontainers.TerminateContainer(c) } // nil-safe
	if err != nil {
		_ = terminate()
		return "", nil, fmt.Errorf("testserver: container %s: %w", spec.image, err)
	}
	endpoint, err := c.PortEndpoint(ctx, spec.port, "")
	if err != nil {
		_ = terminate()
		return "", nil, fmt.Errorf("testserver: container %s: %w", spec.image, err)
	}
	endpoint = strings.Replace(endpoint, "localhost:", "127.0.0.1:", 1)
	for {
		probe, cancelProbe := context.WithTimeout(ctx, 2*time.Second)
		err = spec.ready(probe, endpoint)
		cancelProbe()
		if err == nil {
			return endpoint, terminate, nil
		}
		select {
		case <-ctx.Done():
			_ = terminate()
			return "", nil, fmt.Errorf("testserver: container %s not ready: %w", spec.image, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// localEngine reports whether the Docker engine runs on this machine (no
// DOCKER_HOST, or a Unix socket), so published ports can be bound to
// 127.0.0.1 only.
func localEngine() bool {
	h := os.Getenv("DOCKER_HOST")
	return h == "" || strings.HasPrefix(h, "unix://")
}

// viaContainer starts a shared server in a container when Docker is usable.
// It returns ok == false, and a note for the log, when it is not.
func viaContainer(spec containerSpec) (addr string, note string, ok bool, err error) {
	if derr := dockerUsable(); derr != nil {
		return "", derr.Error(), false, nil
	}
	addr, terminate, err := runContainer(spec)
	if err != nil {
		return "", "", false, err
	}
	onShutdown(terminate)
	return addr, "container " + spec.image, true, nil
}
