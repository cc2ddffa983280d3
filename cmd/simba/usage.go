//go:build unix

package main

import (
	"flag"
	"fmt"
	"strings"
)

// command is one of simba's commands: what help says of it, the flags it
// defines and what it does. Help lists the flags from their definitions.
type command struct {
	name      string
	synopsis  string         // after "simba NAME "
	short     string         // one line for simba help
	long      string         // the description, ending in a newline
	exits     string         // the exit codes, ending in a newline
	define    func(f *flags) // defines the flags beyond --store
	storeless bool           // takes no --store
	run       func(c *cli, f *flags) error
}

const exitHelp = `Exit codes: CMD's status (128+N for signal N); 64 usage; 69 store unavailable;
70 internal error; 75 not acquired; 76 lease lost, CMD terminated; 78 the store grants
less than the safety margin (lower --ttl and --transition); 126 CMD not executable;
127 CMD not found.
`

// commandList is simba's commands in the order help lists them.
var commandList []command

func init() {
	commandList = []command{
		{
			name: "run", synopsis: "[flags] NAME -- CMD [ARG...]", short: "run CMD while holding the lock NAME",
			long: `Acquires the lock NAME, runs CMD with SIMBA_LOCK, SIMBA_OWNER and SIMBA_TOKEN
(the fencing token) in its environment, releases the lock when CMD exits and
exits with CMD's status. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to
CMD. If the lease is lost, CMD is terminated and simba exits 76. Flags may come
before or after NAME; everything after -- is CMD's.
`,
			exits:  exitHelp,
			define: defineRun,
			run:    (*cli).cmdRun,
		},
		{
			name: "elect", synopsis: "[flags] NAME -- CMD [ARG...]", short: "run CMD only while this process leads NAME",
			long: `Contends for leadership of NAME and runs CMD while leading (with SIMBA_LOCK,
SIMBA_OWNER, SIMBA_TOKEN). CMD is terminated when leadership ends and started
again when it returns. When CMD exits by itself, simba resigns and contends
again after a back-off (1s, doubling to 30s). SIGINT or SIGTERM stops CMD,
resigns and exits 0; SIGHUP and SIGQUIT are forwarded to CMD.
`,
			exits: `Exit codes: 0 after SIGINT/SIGTERM; 64 usage; 69 store unavailable; 70 internal
error; 126 CMD not executable; 127 CMD not found.
`,
			define: defineElect,
			run:    (*cli).cmdElect,
		},
		{
			name: "lock", synopsis: "[flags] NAME", short: "hold the lock NAME until interrupted or stdin closes",
			long: `Acquires the lock NAME, prints its fencing token on one line (with --json, an
object {lock, owner, token}) and holds the lock until SIGINT, SIGTERM or SIGHUP,
or until its standard input reaches end of file; then releases it and exits 0.
Run it as a coprocess of a shell script (coproc simba lock NAME), read the
token, and close its input to release. Standard input that is already at its
end (</dev/null, a background job of a script) releases at once; a terminal
that simba reads from the background (lock NAME & in an interactive shell)
holds until a signal.
`,
			exits: `Exit codes: 0 released; 64 usage; 69 store unavailable; 70 internal error;
75 not acquired; 76 the lease was lost while held; 78 the store grants less
than the safety margin; 128+N interrupted by signal N while waiting.
`,
			define: defineLock,
			run:    (*cli).cmdLock,
		},
		{
			name: "watch", synopsis: "[flags] NAME", short: "print the owner of NAME and every change of it",
			long: `Prints the owner of the lock NAME, then one line for every change of owner or
token (with --json, one object {time, lock, owner, token, ttl_ms,
transition_ms} per line; owner "" and token 0 when free), until SIGINT or
SIGTERM.
`,
			exits:  "Exit codes: 0 after SIGINT/SIGTERM; 64 usage; 69 store unavailable; 70 internal error.\n",
			define: defineWatch,
			run:    (*cli).cmdWatch,
		},
		{
			name: "status", synopsis: "[flags] [NAME...]", short: "owners, tokens, remaining ttl and transition",
			long: `Prints owner, fencing token and the time left of ttl and transition for each
NAME; without NAMEs, every held lock of the store, read a page at a time.
`,
			exits:  "Exit codes: 0; 64 usage; 69 store unavailable; 70 internal error.\n",
			define: defineStatus,
			run:    (*cli).cmdStatus,
		},
		{
			name: "migrate", synopsis: "[flags] up|down|version", short: "the schema of a SQL store",
			long: `up creates or upgrades the schema of a SQL store; version prints it; down
drops the table and every lease in it (tokens then start again from 1).
Redis and ZooKeeper need no schema. SQLite files are migrated on first use,
PostgreSQL and MySQL only by simba migrate up.
`,
			exits:  "Exit codes: 0; 64 usage; 69 store unavailable or migration failed; 70 internal error.\n",
			define: defineMigrate,
			run:    (*cli).cmdMigrate,
		},
		{
			name: "version", synopsis: "[--json]", short: "simba's module version, Go version and commit",
			long:      "Prints simba's module version, the Go version it was built with and the\nVCS commit it was built from (also: simba --version).\n",
			exits:     "Exit codes: 0; 64 usage.\n",
			define:    func(f *flags) { f.jsonFlag("print a JSON object {version, go, commit, commit_time, modified}") },
			storeless: true,
			run:       (*cli).cmdVersion,
		},
		{
			name: "completion", synopsis: "bash|zsh", short: "a shell completion script",
			long:      "Prints a completion script for bash or zsh: source <(simba completion bash).\n",
			exits:     "Exit codes: 0; 64 usage.\n",
			define:    func(f *flags) {},
			storeless: true,
			run:       (*cli).cmdCompletion,
		},
	}
}

// commandByName returns the command name.
func commandByName(name string) (command, bool) {
	for _, d := range commandList {
		if d.name == name {
			return d, true
		}
	}
	return command{}, false
}

// commandNames lists the commands, comma-separated.
func commandNames() string {
	var names []string
	for _, d := range commandList {
		names = append(names, d.name)
	}
	return strings.Join(append(names, "help"), ", ")
}

// usageOf returns the help of simba ("") or of one command, with the
// command's flags as defined.
func usageOf(c *cli, name string) string {
	var b strings.Builder
	if name == "" {
		b.WriteString("simba runs commands under distributed locks and leader election.\n\nUsage:\n")
		for _, d := range commandList {
			fmt.Fprintf(&b, "  simba %-40s %s\n", d.name+" "+d.synopsis, d.short)
		}
		fmt.Fprintf(&b, "  simba %-40s %s\n", "help [COMMAND]", "this help, or a command's")
		b.WriteString("\nEvery command but version takes --store URL (or $SIMBA_STORE); the default is a SQLite file\n" +
			"in your state directory, created on first use. Flags may come before or after\n" +
			"NAME; nothing after -- is parsed.\n\n" + exitHelp)
		return b.String()
	}
	d, _ := commandByName(name)
	fmt.Fprintf(&b, "Usage: simba %s %s\n\n%s\nFlags:\n", d.name, d.synopsis, d.long)
	b.WriteString(flagHelp(c.newFlags(name)))
	b.WriteString("\n" + d.exits)
	return b.String()
}

// flagHelp lists the flags of f, one entry each, from their definitions:
// "--name ARG", the usage (its lines indented alike) and the default when
// it is not the zero value and the usage does not tell it.
func flagHelp(f *flags) string {
	var b strings.Builder
	f.VisitAll(func(fl *flag.Flag) {
		arg, text := flag.UnquoteUsage(fl)
		switch arg {
		case "duration":
			arg = "D"
		case "string":
			arg = "S"
		}
		head := "  --" + fl.Name
		if arg != "" {
			head += " " + arg
		}
		if !strings.Contains(text, "default") && !isZero(fl) {
			text += " (default " + fl.DefValue + ")"
		}
		lines := strings.Split(text, "\n")
		fmt.Fprintf(&b, "%-20s%s\n", head+" ", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(&b, "%-20s%s\n", "", l)
		}
	})
	return b.String()
}

// isZero reports whether fl's default is its type's zero value.
func isZero(fl *flag.Flag) bool {
	switch fl.DefValue {
	case "", "0", "0s", "false":
		return true
	}
	return false
}
