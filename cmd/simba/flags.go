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

// flags is a command's flag set plus the flags every command shares.
type flags struct {
	*flag.FlagSet
	cmd   string
	store string
}

func (c *cli) newFlags(cmd string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(cmd, flag.ContinueOnError), cmd: cmd}
	f.SetOutput(io.Discard) // errors are printed as one line by exitCode
	f.StringVar(&f.store, "store", "", "store URL")
	return f
}

// parse parses args; errHelp means the usage was printed and simba exits 0.
func (c *cli) parse(f *flags, args []string) error {
	err := f.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.stdout, usage[f.cmd])
		return errHelp
	}
	if err != nil {
		return fail(codeUsage, "%s: %v (see simba help %s)", f.cmd, err, f.cmd)
	}
	return nil
}

// errHelp ends a command successfully after it printed its usage.
var errHelp = exitStatus(codeOK)

// timingFlags are the lease timings of run and elect.
type timingFlags struct {
	ttl, transition, grace time.Duration
}

func (t *timingFlags) register(f *flags) {
	f.DurationVar(&t.ttl, "ttl", lease.DefaultTTL, "the owner's exclusive window")
	f.DurationVar(&t.transition, "transition", lease.DefaultTransition, "grace after ttl in which only the owner may renew")
	f.DurationVar(&t.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL")
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

// nameAndCommand splits "NAME [--] CMD ARG..." as run and elect take it.
func nameAndCommand(cmd string, args []string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, fail(codeUsage, "%s: missing NAME and CMD (usage: simba %s [flags] NAME -- CMD [ARG...])", cmd, cmd)
	}
	name, rest := args[0], args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return "", nil, fail(codeUsage, "%s: missing CMD after NAME %q (usage: simba %s [flags] NAME -- CMD [ARG...])", cmd, name, cmd)
	}
	if err := lease.ValidateName(name); err != nil {
		return "", nil, fail(codeUsage, "%s: %v", cmd, err)
	}
	return name, rest, nil
}
