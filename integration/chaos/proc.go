package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/simba-go/simba/lease"
)

// The environment of a contender process, set by the campaign.
const (
	envHub        = "SIMBA_CHAOS_HUB"   // the hub's socket
	envName       = "SIMBA_CHAOS_NAME"  // contender id
	envMutex      = "SIMBA_CHAOS_MUTEX" // the lane's lock
	envStart      = "SIMBA_CHAOS_START" // the run's start on the system clock, ns
	envTTL        = "SIMBA_CHAOS_TTL"
	envTransition = "SIMBA_CHAOS_TRANSITION"
	envThink      = "SIMBA_CHAOS_THINK" // Setup.Think
	envTurns      = "SIMBA_CHAOS_TURNS" // Setup.Turns: "true" or "false"
)

// IsChild reports whether this process was started by a campaign as a
// contender process; its TestMain then calls [ChildMain].
func IsChild() bool { return os.Getenv(envHub) != "" }

// proc is one contender process of a lane; a kill and a respawn make a
// new incarnation with a new contender id.
type proc struct {
	s          Setup
	hub, mutex string
	base       string // contender id without the incarnation
	start      time.Duration
	log        string // stdout and stderr of every incarnation

	inc     int
	name    string
	cmd     *exec.Cmd
	f       Faulter
	exited  chan struct{} // closed when the incarnation has exited
	exitErr error         // its exit status, set before exited closes
	spawned time.Time     // when the incarnation was started
}

// spawn starts the next incarnation.
func (p *proc) spawn() error {
	p.inc++
	p.name = fmt.Sprintf("%s.%d", p.base, p.inc)
	p.spawned = time.Now()
	cmd, f := p.s.Spawn()
	cmd.Env = append(cmd.Environ(),
		envHub+"="+p.hub, envName+"="+p.name, envMutex+"="+p.mutex,
		envStart+"="+strconv.FormatInt(int64(p.start), 10),
		envTTL+"="+p.s.TTL.String(), envTransition+"="+p.s.Transition.String(), envThink+"="+cmp.Or(p.s.Think, p.s.TTL).String(),
		envTurns+"="+strconv.FormatBool(p.s.Turns))
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.f, p.exited = cmd, f, exited
	go func() {
		p.exitErr = cmd.Wait()
		close(exited)
	}()
	return nil
}

func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() error {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("still running 10 s after SIGKILL")
	}
}

// killed reports whether the incarnation died of SIGKILL (the nemesis's,
// when the run ended before its respawn).
func (p *proc) killed() bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// terminate asks the process to release and exit (SIGTERM), and kills it
// when it has not within 20 s. An exit status other than 0 is an error.
func (p *proc) terminate() error {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		// An incarnation respawned just before the end may take SIGTERM
		// before its handler is in place (the runtime's start-up).
		young := time.Since(p.spawned) < 5*time.Second && strings.Contains(fmt.Sprint(p.exitErr), "signal: terminated")
		if p.exitErr != nil && !p.killed() && !young {
			return fmt.Errorf("exit: %w (log: %s, which ends: %q)", p.exitErr, p.log, logTail(p.log))
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = p.kill()
		return fmt.Errorf("did not exit within 20 s of SIGTERM (log: %s)", p.log)
	}
}

// ChildMain is a contender process of a campaign: it contends for the
// lane's lock with the store newStore returns (and the Manager options it
// needs, nil for the campaign's ttl and transition) and increments the
// lane's registers through the campaign's hub, until SIGTERM or until the
// hub goes away. newStore may wait for its server as long as ctx lasts (a
// server restarting under load takes seconds): a process told to end
// before it has a store exits with 0. It returns the process's exit code.
func ChildMain(newStore func(ctx context.Context) (lease.Store, []lease.Option, func(), error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 1
	}
	start, err1 := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	ttl, err2 := time.ParseDuration(os.Getenv(envTTL))
	tr, err3 := time.ParseDuration(os.Getenv(envTransition))
	think, err4 := time.ParseDuration(os.Getenv(envThink))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fail(err)
	}
	rm, err := DialHub(ctx, os.Getenv(envHub), time.Duration(start))
	if err != nil {
		return fail(err)
	}
	defer rm.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-rm.Done(): // the campaign is gone
			cancel()
		case <-ctx.Done():
		}
	}()
	store, opts, closeStore, err := newStore(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return 0 // told to end while it waited for its server
		}
		return fail(err)
	}
	defer closeStore()
	if opts == nil {
		opts = []lease.Option{lease.WithTTL(ttl), lease.WithTransition(tr)}
	}
	name := os.Getenv(envName)
	m, err := lease.NewManager(store, append(opts, lease.WithContenderID(name))...)
	if err != nil {
		return fail(err)
	}
	w := &Worker{Name: name, Manager: m, Mutex: os.Getenv(envMutex), Fenced: rm.Fenced(), Unfenced: rm.Unfenced(),
		History: rm, Think: think, Turns: os.Getenv(envTurns) == "true"}
	w.Run(ctx)
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := m.Close(cctx); err != nil {
		return fail(err)
	}
	return 0
}

// logTail returns the last few hundred bytes of a contender process's
// log (the run's directory is removed when the campaign ends).
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-400):])
}
