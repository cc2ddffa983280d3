package chaos

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// WriteReport writes the Markdown report of a campaign (docs/reliability.md
// of `make chaos`): per backend, the episodes, leases, violations, what
// the fence refused, what an unfenced resource lost, the smallest margin
// between a holder's Done and the next grant, and per fault kind the worst
// takeover after healing.
func WriteReport(w io.Writer, title string, results []Result) error {
	sort.Slice(results, func(i, j int) bool { return results[i].Setup < results[j].Setup })
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# %s\n\n", title)
	p("Each backend runs independent lanes: a mutex with its own contenders — in-process Managers, each with its own client, and contender processes — its own fenced and unfenced registers, and its own nemesis (only lane 0's touches the server). ")
	p("Leases lost are those whose holder was told by its deadline; the margin is how long before the next grant the holder of a lost lease was told (I3), the smallest seen (a holder stopped by SIGSTOP or killed is judged by the fence instead: it cannot be told while it does not run).\n\n")
	p("| backend | lanes × contenders | episodes | leases | lost | violations | fenced writes | refused by the fence | unfenced lost updates | smallest margin after a loss |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		p("| %s | %d × (%d + %d processes) | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.Setup, r.Lanes, r.Workers, r.Procs,
			len(r.Episodes), r.Report.Holds, r.Report.Lost,
			len(r.Violations), r.Fenced.Accepted, r.Fenced.Refused, r.Unfenced.Lost, margin(r.Report.LostMargin))
	}
	p("\n## Worst takeover after a healed fault\n\n")
	p("Time from the end of a fault to the next grant on the lane's mutex, to any contender (the victim too). It includes the holders' think time (ttl) between acquiring and releasing; I5 is judged separately, from the fault's start (below).\n\n")
	p("| backend | fault | episodes | worst takeover |\n| --- | --- | --- | --- |\n")
	for _, r := range results {
		type agg struct {
			n     int
			worst time.Duration
		}
		byKind := map[string]*agg{}
		for _, e := range r.Episodes {
			a := byKind[e.Fault]
			if a == nil {
				a = &agg{}
				byKind[e.Fault] = a
			}
			a.n++
			a.worst = max(a.worst, e.Takeover)
		}
		kinds := make([]string, 0, len(byKind))
		for k := range byKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			p("| %s | %s | %d | %s |\n", r.Setup, k, byKind[k].n, byKind[k].worst.Round(time.Millisecond))
		}
	}
	p("\n## What the nemesis does, and what it does not\n\n")
	p("Each episode: wait 0.5 s + up to ttl + transition, pick a contender (the holder three times in four), draw a fault that applies to it, keep it for up to 2 × (ttl + transition), heal, record. ")
	p("Network faults go through a TCP proxy per client (per node for Redis Cluster and the ZooKeeper ensemble); SQLite, which has no network, hangs the in-process client's calls instead. ")
	p("I5 is checked after every black hole, reset or SIGSTOP of a holder that outlasts ttl + transition + 2 s, and after every kill -9 of a holder: another contender must hold within that bound of the fault's start. ")
	p("I7 is checked per lane after everyone closed: the mutex is free within ttl + transition + 2 s; the test process is checked for leaked goroutines.\n\n")
	p("- S5 (client wall clock stepped) is not injected: CLOCK_REALTIME is one clock for the whole machine — stepping it steps the servers' clocks too, which is a server clock fault, not S5 — and a time namespace offsets only the monotonic clocks. The lease and every store's client measure time only through Go's monotonic readings (the Clock contract of package lease); expiry is the server's. ")
	p("For SQLite the server's clock *is* the machine's wall clock: a forward step of the machine clock shortens every held SQLite lease (the fence still rejects the stale holder).\n")
	p("- S7 (Redis failover with asynchronous replication) is documented, not injected: the set-ups have no replicas.\n")
	p("- S8 (ZooKeeper session expiry) happens whenever a ZooKeeper holder is black-holed past its session timeout (ttl + transition here).\n")
	p("- S11 (leader churn) is the campaign itself; S12 (bad input) is covered by the stores' and the lease's unit tests and fuzzing, not here.\n")
	var vs []Violation
	for _, r := range results {
		vs = append(vs, r.Violations...)
	}
	p("\n## Violations\n\n")
	if len(vs) == 0 {
		p("None.\n")
	}
	for _, v := range vs {
		p("- %s\n", v)
	}
	return nil
}

func margin(d time.Duration) string {
	if d == math.MaxInt64 {
		return "—"
	}
	return d.Round(100 * time.Microsecond).String()
}
