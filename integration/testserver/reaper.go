package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// The reaper removes the containers of a test binary when the binary ends,
// however it ends (Shutdown, a panic, go test's timeout, SIGKILL), as
// testcontainers' Ryuk would; Ryuk's image needs a registry, this needs
// nothing. It is the test binary itself, started again before the first
// container: init sees SIMBA_TESTSERVER_REAPER, reads its standard input, a
// pipe whose only writer is the parent, until end of file (the kernel
// closes the pipe when the parent exits), removes every container labelled
// with the parent's session, and exits. It runs in a session of its own,
// so signals meant for the parent's process group (Ctrl-C) do not stop it.

// reaperLabel labels every container this package starts; its value is the
// session of the test binary.
const reaperLabel = "org.simba-go.testserver"

// envReaper names the session whose containers the reaper removes.
const envReaper = "SIMBA_TESTSERVER_REAPER"

func init() {
	if session := os.Getenv(envReaper); session != "" {
		os.Exit(reap(session))
	}
}

var reaper struct {
	sync.Mutex
	session string
	pipe    *os.File // write end, open until this process exits
	err     error
}

// startReaper starts this process's reaper once and returns the session to
// label containers with.
func startReaper() (string, error) {
	reaper.Lock()
	defer reaper.Unlock()
	if reaper.session != "" || reaper.err != nil {
		return reaper.session, reaper.err
	}
	session := unique(strconv.Itoa(os.Getpid()) + "-")
	pipe, err := spawnReaper(session)
	if err != nil {
		reaper.err = fmt.Errorf("testserver: start the container reaper: %w", err)
		return "", reaper.err
	}
	reaper.session, reaper.pipe = session, pipe
	return session, nil
}

// spawnReaper starts a reaper for session and returns the pipe whose
// closing (or this process's exit) sets it off.
func spawnReaper(session string) (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envReaper+"="+session)
	cmd.Stdin = r // stdout and stderr: /dev/null, so go test waits for no pipe of ours
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = reaperAttr()
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, err
	}
	_ = cmd.Process.Release() // never waited for: it outlives us
	return w, nil
}

// reap is the reaper's main: it waits for the parent's end and removes
// the session's containers.
func reap(session string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := removeSession(ctx, session); err != nil {
		return 1
	}
	return 0
}

// removeSession removes every container labelled with session, twice
// (a second apart) for a container whose creation was in flight.
func removeSession(ctx context.Context, session string) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	var errs []error
	for i := range 2 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{
			All: true, Filters: make(client.Filters).Add("label", reaperLabel+"="+session),
		})
		if err != nil {
			return err
		}
		for _, c := range list.Items {
			_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
