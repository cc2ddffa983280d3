//go:build unix

// Command simba runs commands under distributed locks and leader election,
// on any store of simba-go: like flock, consul lock or etcdctl lock, with
// fencing tokens and with SQLite, PostgreSQL, MySQL/MariaDB, Redis or
// ZooKeeper behind it.
//
//	simba run     [flags] NAME -- CMD [ARG...]  run CMD while holding the lock NAME
//	simba elect   [flags] NAME -- CMD [ARG...]  keep CMD running only while this process leads NAME
//	simba lock    [flags] NAME                  hold NAME until a signal or the end of stdin; print the token
//	simba watch   [flags] NAME                  print the owner of NAME and every change of it
//	simba status  [flags] [--json] [NAME...]    owners, tokens, remaining ttl and transition
//	simba migrate [flags] up|down|version       the schema of a SQL store
//	simba version [--json]                      module version, Go version, commit (also simba --version)
//	simba completion bash|zsh                   a shell completion script
//	simba help    [COMMAND]
//
// Flags may come before or after NAME; everything after "--" belongs to
// CMD and is never parsed (without "--", CMD begins at the first argument
// after NAME). simba help COMMAND lists a command's flags, generated from
// their definitions. Every command that prints takes --json. Every
// command but version and completion takes --store URL (default: the
// environment variable SIMBA_STORE, else a SQLite file in the user's state
// directory, $XDG_STATE_HOME/simba/simba.db or ~/.local/state/simba/simba.db,
// created and migrated on first use). Store URLs:
//
//	sqlite://PATH, sqlite:///ABS/PATH   a SQLite file (pure Go; migrated on first use)
//	postgres://USER:PW@HOST:PORT/DB?... PostgreSQL (pgx); migrate once with simba migrate up
//	mysql://USER:PW@HOST:PORT/DB?...    MySQL 8 or MariaDB 10.5+; migrate once with simba migrate up
//	redis://USER:PW@HOST:PORT/DB        Redis (rediss:// for TLS); HOST:PORT,HOST:PORT,... is a Redis Cluster
//	zk://HOST:PORT,HOST:PORT/ROOT       ZooKeeper, locks under ROOT (default /simba)
//
// run and elect take --ttl (default 10s) and --transition (default 6s); on
// ZooKeeper their sum is the session timeout asked for (default 10s, split
// 5:3). The server may grant a shorter one: without flags it sets the
// timings; with flags whose safety margin no grant outlives, simba exits
// with 64.
//
// # simba run
//
// run acquires NAME, waiting as long as --wait says (default: forever;
// --no-wait makes one attempt), then runs CMD with SIMBA_LOCK (the name),
// SIMBA_OWNER (this process's contender id) and SIMBA_TOKEN (the fencing
// token, which only grows) added to its environment, and its standard input,
// output and error those of simba. Pass SIMBA_TOKEN to whatever CMD writes to,
// and have it reject tokens lower than the highest it has seen: nothing else
// protects against a holder that was paused past its lease.
//
// CMD runs in a process group of its own; SIGINT, SIGTERM, SIGHUP and SIGQUIT
// sent to simba are forwarded to that group. When simba runs in the
// foreground of a terminal, CMD's group takes the foreground while it runs,
// so CMD can read the terminal and Ctrl-C reaches it once.
// When CMD exits, simba releases the lock and exits with CMD's status. If the
// lease is lost while CMD runs (its renewals failed until the deadline at
// which the store could grant it to another), simba sends SIGTERM to CMD's
// group, SIGKILL after --grace (default 10s) but never later than half the
// safety margin (max(transition/2, ttl/10)) after the loss, so that CMD is gone
// before anyone else can be granted the lock, and exits with 76. If simba
// itself is killed (SIGKILL, a crash), CMD gets SIGKILL from the kernel
// (Linux; processes that CMD started are not reached): it must not run on
// without the lock.
//
// # simba elect
//
// elect contends for NAME and runs CMD while it leads, with SIMBA_LOCK,
// SIMBA_OWNER and SIMBA_TOKEN as for run. When leadership is lost, CMD gets
// SIGTERM and, as for run, SIGKILL before anyone else can lead; when it comes
// back, CMD is started again with the new token. When CMD exits by itself
// while leading, simba resigns (so that another process, perhaps on a healthy
// machine, takes over) and contends again after a back-off of 1s, doubling up
// to 30s and starting from 1s again once CMD had run for a minute. SIGINT or
// SIGTERM to simba stops CMD (SIGTERM, SIGKILL after --grace), resigns and
// exits 0; SIGHUP and SIGQUIT are forwarded to CMD's group.
//
// # Logs, metrics and health
//
// run and elect take --log-level (debug, info, warn or error; default
// warn), which sets which of the lease package's records simba prints on
// standard error, one line each ("simba: info: lease acquired
// event=acquired lock=NAME token=N"); records of what simba reports
// itself (a lost lease, leadership) are left out by their event. With
// --listen ADDR (for example 127.0.0.1:9464) they serve GET /metrics, the
// lease package's OpenTelemetry instruments in the Prometheus text format,
// and GET /healthz, 200 "ok" or 503 with the reason when a renewal is
// overdue by more than ttl/3 or the store has answered no call for longer
// than its call timeout. At --log-level info, simba says where it serves.
//
// # simba status
//
// status prints, for each NAME, the owner, the fencing token and the time
// left of the owner's ttl and of its transition (after which anyone may take
// it), in a table or, with --json, as a JSON array of objects with the fields
// lock, owner, token, ttl_ms and transition_ms. Without NAMEs, it lists every
// held lock of the store (lease.Lister), a page of 500 names at a time, each
// page printed before the next is read (table columns align within a page;
// on Redis a name may show twice when the server rehashes meanwhile).
//
// # simba lock
//
// lock acquires NAME (--wait and --no-wait as for run), prints its fencing
// token on a line of its own (--json: {"lock", "owner", "token"}) and holds
// the lock until SIGINT, SIGTERM or SIGHUP, or until its standard input
// reaches its end; then it releases the lock and exits 0. A shell script
// runs it as a coprocess, reads the token and closes the coprocess's input
// to release. If the lease is lost meanwhile, lock exits 76.
//
// # simba watch
//
// watch prints the owner of NAME, then a line for every change of owner or
// token ("TIME NAME held by OWNER token N" or "TIME NAME free"; --json: one
// object per line with time, lock, owner, token, ttl_ms and transition_ms),
// until SIGINT or SIGTERM, and exits 0. Changes come from the store's
// notifications where it has them, else from polling.
//
// # simba migrate
//
// migrate applies (up) or reverts (down) the schema of a SQL store, or prints
// its version. down drops the table and every lease in it, and fencing tokens
// of the store start again from 1: stop every holder first. Redis and
// ZooKeeper need no schema; migrate says so and exits 0. PostgreSQL and MySQL
// are never migrated implicitly: run simba migrate up once, with a role that
// may create tables. SQLite files are migrated on first use.
//
// # Exit codes
//
// simba run exits with CMD's own exit status, or 128+N when signal N ended
// CMD. simba's own outcomes have the codes below, and all but 0 come with
// exactly one line on standard error, starting with "simba: " (by which a
// script tells them from a CMD that exits with the same code):
//
//	0      success (elect: stopped by SIGINT or SIGTERM)
//	64     usage: bad flags, unknown command, bad store URL, timings the store cannot honour
//	69     store unavailable: unreachable, not migrated, or failing
//	70     internal error
//	75     run, lock: lock not acquired: held (--no-wait), or --wait ran out
//	76     run: the lease was lost while CMD ran; CMD was terminated
//	       (lock: while it held the lock)
//	78     run: the store grants less than the safety margin (ttl + transition
//	       exceed a limit of the store); a store that states its limit makes
//	       such --ttl and --transition a usage error (64) instead
//	126    run, elect: CMD cannot be started
//	127    run, elect: CMD not found
//	128+N  run, lock: simba was interrupted by signal N while waiting for the lock
//
// simba runs on Unix systems (process groups and signals are its job); on
// Windows this package builds nothing.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	quietDrivers()
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}

// cli is one invocation: its environment and standard streams.
type cli struct {
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// getenv returns the last value of key in the invocation's environment.
func (c *cli) getenv(key string) string {
	v := ""
	for _, kv := range c.environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// printf writes one line "simba: ..." to standard error.
func (c *cli) printf(format string, args ...any) {
	fmt.Fprintln(c.stderr, "simba: "+oneLine(fmt.Sprintf(format, args...)))
}

// run executes one simba invocation and returns its exit code.
func run(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{environ: environ, stdin: stdin, stdout: stdout, stderr: stderr}
	return c.exitCode(c.dispatch(args))
}

func (c *cli) dispatch(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, usageOf(c, ""))
		return fail(codeUsage, "no command (see simba help)")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return c.help(rest)
	case "--version", "-version":
		name = "version"
	}
	d, ok := commandByName(name)
	if !ok {
		return fail(codeUsage, "unknown command %q (commands: %s)", name, commandNames())
	}
	f := c.newFlags(name)
	if err := c.parse(f, rest); err != nil {
		return err
	}
	return d.run(c, f)
}

// help prints the usage of simba or of one command to standard output.
func (c *cli) help(args []string) error {
	topic := ""
	if len(args) > 0 {
		topic = args[0]
	}
	if _, ok := commandByName(topic); !ok && topic != "" {
		return fail(codeUsage, "help: unknown command %q", topic)
	}
	fmt.Fprint(c.stdout, usageOf(c, topic))
	return nil
}
