//go:build unix

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/simba-go/simba/lease"
)

// flags is a command's flag set plus the flags every command shares, and
// the command's arguments once parsed.
type flags struct {
	*flag.FlagSet
	cmd   string
	store string
	// json is --json, on the commands that print.
	json bool
	// maxArgs is how many arguments the command takes before CMD (run and
	// elect: NAME), or -1 when it takes any number and no CMD.
	maxArgs int
	// args are the arguments other than flags, in order; cmdArgs is CMD
	// and its arguments: everything after "--", or after the maxArgs-th
	// argument (run NAME CMD ARG...).
	args, cmdArgs []string

	// The flags of the commands that take them (see the define functions).
	tf timingFlags
	of obsFlags
	wf waitFlags
}

func defineRun(f *flags) {
	f.maxArgs = 1
	f.wf.register(f)
	f.tf.register(f)
	f.tf.registerGrace(f)
	f.of.register(f)
}

func defineElect(f *flags) {
	f.maxArgs = 1
	f.tf.register(f)
	f.tf.registerGrace(f)
	f.of.register(f)
}

func defineLock(f *flags) {
	f.wf.register(f)
	f.tf.register(f)
	f.of.register(f)
	f.jsonFlag("print the token as a JSON object {lock, owner, token}")
}

func defineWatch(f *flags) {
	f.jsonFlag("print one JSON object {time, lock, owner, token, ttl_ms, transition_ms} per line")
}

func defineStatus(f *flags) {
	f.jsonFlag("print a JSON array of {lock, owner, token, ttl_ms, transition_ms}")
}

func defineMigrate(f *flags) {
	f.jsonFlag("print the version as a JSON object {version, dirty} ({store} when there is no schema)")
}

// newFlags returns the flag set of the command cmd, with every flag the
// command defines (see commands); help is generated from it.
func (c *cli) newFlags(cmd string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(cmd, flag.ContinueOnError), cmd: cmd, maxArgs: -1}
	f.SetOutput(io.Discard) // errors are printed as one line by exitCode
	d, ok := commandByName(cmd)
	if ok && d.storeless {
		d.define(f)
		return f
	}
	f.StringVar(&f.store, "store", "", "the store `URL` (default $SIMBA_STORE, else ~/.local/state/simba/simba.db):\n"+
		"  sqlite://PATH, sqlite:///ABS/PATH\n"+
		"  postgres://USER:PW@HOST:PORT/DB\n"+
		"  mysql://USER:PW@HOST:PORT/DB\n"+
		"  redis://[USER:PW@]HOST:PORT[,HOST:PORT...][/DB], rediss://...\n"+
		"  zk://HOST:PORT[,HOST:PORT...][/ROOT]")
	if ok {
		d.define(f)
	}
	return f
}

// jsonFlag defines --json.
func (f *flags) jsonFlag(what string) {
	f.BoolVar(&f.json, "json", false, what)
}

// parse parses args: flags may come before, between and after the
// arguments, up to "--" or (for run and elect) the start of CMD; nothing
// after that is parsed. errHelp means the usage was printed and simba
// exits 0.
func (c *cli) parse(f *flags, args []string) error {
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, usageOf(c, f.cmd))
			return errHelp
		}
		if err != nil {
			return fail(codeUsage, "%s: %v (see simba help %s)", f.cmd, err, f.cmd)
		}
		rest := f.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			if f.maxArgs < 0 {
				f.args = append(f.args, rest...)
			} else {
				f.cmdArgs = rest
			}
			return nil
		}
		if len(rest) == 0 {
			return nil
		}
		if f.maxArgs >= 0 && len(f.args) == f.maxArgs {
			f.cmdArgs = rest // CMD without "--": it begins at the first argument after NAME
			return nil
		}
		f.args = append(f.args, rest[0])
		args = rest[1:]
	}
}

// errHelp ends a command successfully after it printed its usage.
var errHelp = exitStatus(codeOK)

// timingFlags are the lease timings of run, elect and lock.
type timingFlags struct {
	ttl, transition, grace time.Duration
}

func (t *timingFlags) register(f *flags) {
	f.DurationVar(&t.ttl, "ttl", lease.DefaultTTL, fmt.Sprintf("the owner's exclusive window (default %v;\nZooKeeper without --ttl and --transition: 5/8 of its session timeout)", lease.DefaultTTL))
	f.DurationVar(&t.transition, "transition", lease.DefaultTransition, fmt.Sprintf("grace after ttl in which only the owner may renew (default %v;\nZooKeeper: 3/8 of its session timeout)", lease.DefaultTransition))
}

func (t *timingFlags) registerGrace(f *flags) {
	f.DurationVar(&t.grace, "grace", 10*time.Second, "time CMD gets between SIGTERM and SIGKILL (default 10s; on a lost\n"+
		"lease at most half the safety margin, so CMD ends before anyone\n"+
		"else can be granted the lock)")
}

// timing returns the timings to open the store with; set tells whether
// the user gave --ttl or --transition (ZooKeeper otherwise derives them
// from its session timeout).
func (t *timingFlags) timing(f *flags) (timing, error) {
	set := false
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == "ttl" || fl.Name == "transition" {
			set = true
		}
	})
	switch {
	case t.ttl < time.Millisecond:
		return timing{}, fail(codeUsage, "%s: --ttl must be at least 1ms", f.cmd)
	case t.transition < 0:
		return timing{}, fail(codeUsage, "%s: --transition must not be negative", f.cmd)
	case t.grace < 0:
		return timing{}, fail(codeUsage, "%s: --grace must not be negative", f.cmd)
	}
	return timing{ttl: t.ttl, transition: t.transition, set: set}, nil
}

// waitFlags are --wait and --no-wait of run and lock.
type waitFlags struct {
	wait   time.Duration
	noWait bool
}

func (w *waitFlags) register(f *flags) {
	f.DurationVar(&w.wait, "wait", 0, "give up after `D` when the lock stays held (default: wait forever)")
	f.BoolVar(&w.noWait, "no-wait", false, "one attempt: exit 75 at once when the lock is held")
}

// check rejects --wait with --no-wait and a --wait that is not positive.
func (w *waitFlags) check(f *flags) error {
	waitSet := false
	f.Visit(func(fl *flag.Flag) { waitSet = waitSet || fl.Name == "wait" })
	switch {
	case waitSet && w.noWait:
		return fail(codeUsage, "%s: --wait and --no-wait exclude each other", f.cmd)
	case waitSet && w.wait <= 0:
		return fail(codeUsage, "%s: --wait must be positive (or use --no-wait)", f.cmd)
	}
	return nil
}

// nameAndCommand returns NAME and CMD of run and elect.
func nameAndCommand(f *flags) (string, []string, error) {
	cmd := f.cmd
	if len(f.args) == 0 {
		return "", nil, fail(codeUsage, "%s: missing NAME and CMD (usage: simba %s [flags] NAME -- CMD [ARG...])", cmd, cmd)
	}
	name := f.args[0]
	if len(f.cmdArgs) == 0 {
		return "", nil, fail(codeUsage, "%s: missing CMD after NAME %q (usage: simba %s [flags] NAME -- CMD [ARG...])", cmd, name, cmd)
	}
	if err := lease.ValidateName(name); err != nil {
		return "", nil, fail(codeUsage, "%s: %v", cmd, err)
	}
	return name, f.cmdArgs, nil
}

// oneName returns the single NAME of lock and watch.
func oneName(f *flags) (string, error) {
	if len(f.args) != 1 || len(f.cmdArgs) > 0 {
		return "", fail(codeUsage, "%s: want exactly one NAME (usage: simba %s [flags] NAME)", f.cmd, f.cmd)
	}
	if err := lease.ValidateName(f.args[0]); err != nil {
		return "", fail(codeUsage, "%s: %v", f.cmd, err)
	}
	return f.args[0], nil
}
