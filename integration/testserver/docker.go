package testserver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
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
// Before testcontainers reads its configuration it sets
// TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 for a local engine unless the
// environment names another host (inside a container testcontainers would
// otherwise take the default gateway for the Docker host and send its
// probes there), and TESTCONTAINERS_RYUK_DISABLED=true unless the
// environment says false (the reaper image needs a registry; this package
// removes its containers itself, see reaper.go).
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
		// testcontainers honours "true" only: with "1" it would start Ryuk,
		// fail to pull it, remove the server's container and return an error.
		if v, err := strconv.ParseBool(os.Getenv("TESTCONTAINERS_RYUK_DISABLED")); err != nil || v {
			_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
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

// dockerMissing is the error of a helper that must use a container
// (SIMBA_TEST_DOCKER=1) when Docker is not usable.
func dockerMissing(server, why string) error {
	return &MissingError{Server: server, Package: "docker.io", Env: EnvDocker, Script: ".ci/install-docker",
		Detail: EnvDocker + "=" + os.Getenv(EnvDocker) + " asks for a container, but " + why}
}
