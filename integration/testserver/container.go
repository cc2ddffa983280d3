package testserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

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
	probePort, opts, err := publish(spec)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		testcontainers.WithEnv(spec.env),
		testcontainers.WithLabels(map[string]string{reaperLabel: label}),
		testcontainers.WithWaitStrategy(wait.ForListeningPort(probePort).WithStartupTimeout(3*time.Minute)))
	if len(spec.cmd) > 0 {
		opts = append(opts, testcontainers.WithCmd(spec.cmd...))
	}
	c, err := testcontainers.Run(ctx, spec.image, opts...)
	r := &runningContainer{image: spec.image, c: c}
	if c != nil {
		r.id = shortID(c.GetContainerID())
	}
	if err == nil {
		r.endpoint, err = c.PortEndpoint(ctx, probePort, "")
		r.endpoint = strings.Replace(r.endpoint, "localhost:", "127.0.0.1:", 1)
	}
	if err == nil {
		err = waitReady(ctx, spec.ready, r.endpoint)
	}
	if err != nil {
		_ = r.terminate()
		return nil, fmt.Errorf("testserver: container %s: %w", spec.image, err)
	}
	what := ""
	if spec.what != "" {
		what = " for " + spec.what
	}
	fmt.Fprintf(os.Stderr, "testserver: started container %s (%s)%s at %s in %v\n",
		r.id, r.image, what, r.endpoint, time.Since(begin).Round(time.Millisecond))
	return r, nil
}

// publish returns the options that expose the spec's ports, published on
// 127.0.0.1 only when the engine runs here, and the port to probe.
func publish(spec containerSpec) (probe string, opts []testcontainers.ContainerCustomizer, err error) {
	loopback := netip.MustParseAddr("127.0.0.1")
	bindings := network.PortMap{}
	if len(spec.fixedPorts) == 0 {
		if localEngine() {
			bindings[network.MustParsePort(spec.port)] = []network.PortBinding{{HostIP: loopback, HostPort: "0"}}
		}
		opts = append(opts, testcontainers.WithExposedPorts(spec.port))
	} else {
		if !localEngine() {
			return "", nil, fmt.Errorf("testserver: container %s: fixed ports need a local Docker engine (DOCKER_HOST=%s)", spec.image, os.Getenv("DOCKER_HOST"))
		}
		var exposed []string
		for _, p := range spec.fixedPorts {
			port := network.MustParsePort(strconv.Itoa(p) + "/tcp")
			exposed = append(exposed, port.String())
			bindings[port] = []network.PortBinding{{HostIP: loopback, HostPort: strconv.Itoa(p)}}
		}
		spec.port = exposed[0]
		opts = append(opts, testcontainers.WithExposedPorts(exposed...))
	}
	if len(bindings) > 0 {
		opts = append(opts, testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.PortBindings = bindings }))
	}
	return spec.port, opts, nil
}

// waitReady calls ready until it succeeds or ctx ends.
func waitReady(ctx context.Context, ready func(ctx context.Context, addr string) error, addr string) error {
	for {
		probe, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ready(probe, addr)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", errors.Join(err, ctx.Err()))
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
