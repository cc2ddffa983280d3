package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// requireContainers skips the test unless this run asks for containers
// (SIMBA_TEST_DOCKER=1, as make test-containers does); then a missing
// engine skips it, or fails it in CI.
func requireContainers(t *testing.T) {
	t.Helper()
	if containerMode() != dockerRequired {
		t.Skipf("containers not asked for: set %s=1 (make test-containers)", EnvDocker)
	}
	if err := dockerUsable(); err != nil {
		need(t, dockerMissing("docker", err.Error()))
	}
}

func dockerClient(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	cli, err := testcontainers.NewDockerClientWithOpts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var containerID = regexp.MustCompile(`\(container (\S+) ([0-9a-f]{12})\)`)

// TestContainerServers starts every shared server kind in its container and
// checks that each runs the image its variable names (when set), under this
// binary's label, with its ports published on 127.0.0.1 only.
func TestContainerServers(t *testing.T) {
	requireContainers(t)
	cluster := RedisCluster(t)
	servers := map[string]struct{ env, desc string }{
		"redis":         {EnvImageRedis, Redis(t).String()},
		"redis cluster": {EnvImageRedis, cluster.Node(0).String() + " " + strings.Join(cluster.Addrs(), ",")},
		"postgres":      {EnvImagePostgres, Postgres(t).String()},
		"mysql":         {EnvImageMySQL, MySQL(t).String()},
		"zookeeper":     {EnvImageZooKeeper, ZooKeeper(t).String()},
	}
	cli := dockerClient(t)
	for kind, s := range servers {
		m := containerID.FindStringSubmatch(s.desc)
		if m == nil {
			t.Errorf("%s is not a container: %s", kind, s.desc)
			continue
		}
		if want := os.Getenv(s.env); want != "" && m[1] != want {
			t.Errorf("%s runs image %s, want %s (%s)", kind, m[1], want, s.env)
		}
		got, err := cli.ContainerInspect(t.Context(), m[2], client.ContainerInspectOptions{})
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		c := got.Container
		if c.Config.Labels[reaperLabel] == "" {
			t.Errorf("%s: container %s has no %s label", kind, m[2], reaperLabel)
		}
		for port, bindings := range c.NetworkSettings.Ports {
			for _, b := range bindings {
				if b.HostIP.String() != "127.0.0.1" {
					t.Errorf("%s: port %s published on %s, want 127.0.0.1 only", kind, port, b.HostIP)
				}
			}
		}
		t.Logf("%s: %s", kind, s.desc)
	}
}

// TestContainerRemovedWhenBinaryDies kills (SIGKILL) a test binary that
// holds a container, as go test's timeout or a crash would end it before
// Shutdown: the reaper must remove the container.
func TestContainerRemovedWhenBinaryDies(t *testing.T) {
	requireContainers(t)
	if os.Getenv("SIMBA_TESTSERVER_DIE") == "1" { // the binary to kill
		r, err := runContainer(containerSpec{image: imageRedis, port: "6379/tcp", ready: pingRedis})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("CONTAINER", r.c.GetContainerID())
		time.Sleep(time.Hour)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestContainerRemovedWhenBinaryDies$", "-test.v")
	cmd.Env = append(os.Environ(), "SIMBA_TESTSERVER_DIE=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "CONTAINER "); ok {
			id = rest
			break
		}
		t.Log(lines.Text())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if id == "" {
		t.Fatal("the helper binary started no container")
	}
	cli := dockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("id", id)})
		if err == nil && len(list.Items) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("container %s still there a minute after its test binary was killed (%v)", shortID(id), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestContainersRequiredWithoutEngine runs a test binary that asks for
// containers (SIMBA_TEST_DOCKER=1) where no engine answers: its helpers
// must not fall back to local servers but skip, or fail in CI.
func TestContainersRequiredWithoutEngine(t *testing.T) {
	if os.Getenv("SIMBA_TESTSERVER_NO_ENGINE") == "1" { // the binary without an engine
		dockerProbe.once.Do(func() { dockerProbe.err = errors.New("no engine (simulated)") })
		Redis(t)
		t.Fatal("Redis returned a server")
	}
	for _, ci := range []string{"false", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestContainersRequiredWithoutEngine$", "-test.v")
		cmd.Env = append(os.Environ(), "SIMBA_TESTSERVER_NO_ENGINE=1", EnvDocker+"=1", "CI="+ci, EnvRedis+"=")
		out, _ := cmd.CombinedOutput()
		want := "--- SKIP"
		if ci == "true" {
			want = "--- FAIL"
		}
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "asks for a container") {
			t.Errorf("CI=%s: want %q and a message that a container was asked for; got:\n%s", ci, want, out)
		}
	}
}

// TestContainerRyukDisabledByOne runs a test binary with
// TESTCONTAINERS_RYUK_DISABLED=1, which testcontainers takes for false (it
// honours "true" only) and would then try to pull the reaper: the rig must
// read it as true and get its container.
func TestContainerRyukDisabledByOne(t *testing.T) {
	requireContainers(t)
	if os.Getenv("SIMBA_TESTSERVER_RYUK_ONE") == "1" { // the binary with the variable
		fmt.Println("SERVER", Redis(t).String())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestContainerRyukDisabledByOne$", "-test.v")
	cmd.Env = append(os.Environ(), "SIMBA_TESTSERVER_RYUK_ONE=1", "TESTCONTAINERS_RYUK_DISABLED=1", EnvRedis+"=")
	out, err := cmd.CombinedOutput()
	if err != nil || !containerID.Match(out) {
		t.Fatalf("want a Redis container with TESTCONTAINERS_RYUK_DISABLED=1; got %v:\n%s", err, out)
	}
}
