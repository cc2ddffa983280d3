//go:build unix

package main

const storeHelp = `  --store URL       the store (default $SIMBA_STORE, else ~/.local/state/simba/simba.db):
                      sqlite://PATH, sqlite:///ABS/PATH
                      postgres://USER:PW@HOST:PORT/DB
                      mysql://USER:PW@HOST:PORT/DB
                      redis://[USER:PW@]HOST:PORT[,HOST:PORT...][/DB], rediss://...
                      zk://HOST:PORT[,HOST:PORT...][/ROOT]
`

const timingHelp = `  --ttl D           the owner's exclusive window (default 10s; ZooKeeper 6.25s)
  --transition D    grace after ttl in which only the owner may renew (default 6s; ZooKeeper 3.75s)
  --grace D         time CMD gets between SIGTERM and SIGKILL (default 10s; on a lost
                    lease at most half the safety margin, so CMD ends before anyone else
                    can be granted the lock)
`

const obsHelp = `  --log-level L     debug, info, warn or error: the library's records shown on stderr
                    (default warn: failed renewals and store calls)
  --listen ADDR     serve /metrics (Prometheus text) and /healthz on ADDR, e.g. 127.0.0.1:9464
                    (/healthz is 503 when a renewal is overdue by ttl/3 or the store does not answer)
`

const exitHelp = `Exit codes: CMD's status (128+N for signal N); 64 usage; 69 store unavailable;
75 not acquired; 76 lease lost, CMD terminated; 78 the store grants less than the safety
margin (lower --ttl and --transition); 126 CMD not executable; 127 CMD not found.
`

// usage holds the help texts, by command ("" is simba's own).
var usage = map[string]string{
	"": `simba runs commands under distributed locks and leader election.

Usage:
  simba run     [flags] NAME -- CMD [ARG...]  run CMD while holding the lock NAME
  simba elect   [flags] NAME -- CMD [ARG...]  run CMD only while this process leads NAME
  simba status  [flags] [NAME...]             owners, tokens, remaining ttl and transition
  simba migrate [flags] up|down|version       the schema of a SQL store
  simba help    [COMMAND]

Every command takes --store URL (or $SIMBA_STORE); the default is a SQLite file
in your state directory, created on first use.

` + exitHelp,

	"run": `Usage: simba run [flags] NAME -- CMD [ARG...]

Acquires the lock NAME, runs CMD with SIMBA_LOCK, SIMBA_OWNER and SIMBA_TOKEN
(the fencing token) in its environment, releases the lock when CMD exits and
exits with CMD's status. SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to
CMD. If the lease is lost, CMD is terminated and simba exits 76.

Flags:
` + storeHelp + `  --wait D          give up after D when the lock stays held (default: wait forever)
  --no-wait         one attempt: exit 75 at once when the lock is held
` + timingHelp + obsHelp + `
` + exitHelp,

	"elect": `Usage: simba elect [flags] NAME -- CMD [ARG...]

Contends for leadership of NAME and runs CMD while leading (with SIMBA_LOCK,
SIMBA_OWNER, SIMBA_TOKEN). CMD is terminated when leadership ends and started
again when it returns. When CMD exits by itself, simba resigns and contends
again after a back-off (1s, doubling to 30s). SIGINT or SIGTERM stops CMD,
resigns and exits 0; SIGHUP and SIGQUIT are forwarded to CMD.

Flags:
` + storeHelp + timingHelp + obsHelp + `
Exit codes: 0 after SIGINT/SIGTERM; 64 usage; 69 store unavailable;
126 CMD not executable; 127 CMD not found.
`,

	"status": `Usage: simba status [flags] [NAME...]

Prints owner, fencing token and the time left of ttl and transition for each
NAME; without NAMEs, every held lock (SQL stores only).

Flags:
` + storeHelp + `  --json            a JSON array of {lock, owner, token, ttl_ms, transition_ms}

Exit codes: 0; 64 usage; 69 store unavailable.
`,

	"migrate": `Usage: simba migrate [flags] up|down|version

up creates or upgrades the schema of a SQL store; version prints it; down
drops the table and every lease in it (tokens then start again from 1).
Redis and ZooKeeper need no schema. SQLite files are migrated on first use,
PostgreSQL and MySQL only by simba migrate up.

Flags:
` + storeHelp + `
Exit codes: 0; 64 usage; 69 store unavailable or migration failed.
`,
}
