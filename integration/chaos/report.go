package chaos

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
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
	p("Each backend runs independent lanes: a lock with its own contenders — in-process Managers, each with its own client, and contender processes — its own fenced and unfenced registers, and its own nemesis (only lane 0's touches the server). ")
	p("Leases lost are those whose holder was told by its deadline; the margin is how long before the next grant the holder of a lost lease was told (I3), the smallest seen (a holder stopped by SIGSTOP or killed is judged by the fence instead: it cannot be told while it does not run).\n\n")
	p("| backend | lanes × contenders | episodes | leases | lost | violations | fenced writes | refused by the fence | unfenced lost updates | smallest margin after a loss |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		p("| %s | %d × (%d + %d processes) | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.Setup, r.Lanes, r.Workers, r.Procs,
			len(r.Episodes), r.Report.Holds, r.Report.Lost,
			len(r.Violations), r.Fenced.Accepted, r.Fenced.Refused, r.Unfenced.Lost, margin(r.Report.LostMargin))
	}
	p("\n## Worst takeover after a healed fault\n\n")
	p("Time from the end of a fault to the next grant on the lane's lock, to any contender (the victim too). It includes the holders' think time (ttl) between acquiring and releasing; I5 is judged separately, from the fault's start (below).\n\n")
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
	handoffRow := func(setup string, gaps []time.Duration, bound time.Duration) {
		if len(gaps) == 0 {
			return
		}
		judged := "no"
		if bound > 0 {
			judged = "within " + bound.String()
		}
		p("| %s | %s | %d | %s |\n", setup, judged, len(gaps), slices.Max(gaps).Round(time.Millisecond))
	}
	p("\n## Hand-offs after a kill of the head waiter\n\n")
	p("From the first release after the kill (within the episode, away from server faults) to the next grant.\n\n| backend | judged | measured | worst |\n| --- | --- | --- | --- |\n")
	for _, r := range results {
		handoffRow(r.Setup, r.HeadHandoffs, r.Handoff)
	}
	p("\n## Hand-offs after a release while others waited\n\n")
	p("From a release (away from faults: see checkWake) to the next grant; a waiter that missed its wake-up sleeps until its poll.\n\n| backend | judged | measured | worst |\n| --- | --- | --- | --- |\n")
	for _, r := range results {
		handoffRow(r.Setup, r.Wakes, r.Wake)
	}
	p("\n## Per backend: which faults are survived, detected, or only fenced\n\n")
	p("Survived: the holder is told of its loss before anyone else is granted the lock, and I1–I7 hold. Detected: the store or the lease notices the fault itself and holds the lock back until no lost grant can still be believed. Only the fence: the holder cannot be told in time (it does not run, or its clock assumption is broken); a write it makes late carries a stale token, which a fenced resource refuses. ")
	p("Violations are counted per backend (below); overlaps are the holds that overlapped another after a fault beyond the documented assumptions (not violations: see the next section).\n")
	for _, r := range results {
		type agg struct{ n, overlaps, steps, caught int }
		byKind := map[string]*agg{}
		steps := 0
		for _, e := range r.Episodes {
			a := byKind[e.Fault]
			if a == nil {
				a = &agg{}
				byKind[e.Fault] = a
			}
			a.n++
			a.overlaps += e.Overlaps
			a.steps += e.Detected
			steps += e.Detected
			if e.Detected > 0 {
				a.caught++
			}
		}
		kinds := make([]string, 0, len(byKind))
		for k := range byKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		p("\n### %s\n\n%d episodes, %d violations, %d writes refused by the fence, %d clock_step events of the lease's detector after the clock steps.\n\n",
			r.Setup, len(r.Episodes), len(r.Violations), r.Fenced.Refused, steps)
		p("| fault | episodes | outcome | overlaps | clock_step events (episodes with one) |\n| --- | --- | --- | --- | --- |\n")
		for _, k := range kinds {
			steps := ""
			if strings.Contains(k, "clock steps") {
				steps = fmt.Sprintf("%d (%d)", byKind[k].steps, byKind[k].caught)
			}
			p("| %s | %d | %s | %d | %s |\n", k, byKind[k].n, outcome(k), byKind[k].overlaps, steps)
		}
	}
	p("\n## Server clock steps beyond the assumption\n\n")
	p("A forward step of a server's wall clock by more than the safety margin shortens every live grant on that server by more than the margin keeps in reserve: a holder may believe a grant the server already gave away. ")
	p("Holds that overlapped another within ttl + transition + 2 s of such a step are counted here, not as violations; the fenced register (I2) and the token order (I1) still judge every write and every grant. ")
	p("The lease's detector of server clock steps (it logs \"clock_step\" and counts simba.lease.server.clock.steps when a reply shows the server's clock ran ahead, and brings the other leases' deadlines forward) can only see a step in a reply that follows it. ")
	p("Its events are those of the in-process Managers (3 per lane; the contender processes' are not collected). Per step: caught first — a clock_step event came before any overlapping hold (or none followed); only the fence — holds overlapped before any event; neither — no event and no overlap.\n\n")
	p("| backend | forward steps > margin | caught first by the detector | only the fence (overlap before any detection) | neither | overlaps | token or fence violations (I1, I2) |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		far, caught, fenceOnly, neither := 0, 0, 0, 0
		for _, e := range r.Episodes {
			if !e.Beyond {
				continue
			}
			far++
			switch {
			case e.CaughtFirst():
				caught++
			case e.Overlaps > 0:
				fenceOnly++
			default:
				neither++
			}
		}
		if far == 0 {
			continue
		}
		fence := 0
		for _, v := range r.Violations {
			if v.Invariant == "I1" || v.Invariant == "I2" {
				fence++
			}
		}
		p("| %s | %d | %d | %d | %d | %d | %d |\n", r.Setup, far, caught, fenceOnly, neither, len(r.Beyond), fence)
	}
	for _, r := range results {
		for _, v := range r.Beyond {
			p("\n- %s: %s", r.Setup, v)
		}
	}
	p("\n\n## What the nemesis does, and what it does not\n\n")
	p("Each episode: wait 0.5 s + up to ttl + transition, pick a contender (the holder three times in four), draw the fault drawn least so far among those that apply to it or have a victim of their own (ties at random; with several lanes, lane 0 draws only server faults), keep it for up to 2 × (ttl + transition), heal, record. ")
	p("Faults with a victim of their own: the lane's Contender (its first in-process worker) abandons its grant (Stop with a context that ends before the callback returns, after half a ttl of lost renewal replies where the connection can drop them; the next Contender of the same Manager contends at once, beside the abandoned callback), stops its Contender or closes its Manager from inside its callback (each must return within 1 s: S16 violations otherwise), each when it next leads (an abandon waits up to 2 × (ttl + transition) for it); kill -9 of a waiting process, and of the process that has waited longest while others wait behind it (the head of a fair queue). ")
	p("After a kill of the head waiter, the first release is followed by the next grant within the hand-off window and 1.5 s on Redis (I5: a store that keeps the hand-off reserved for a dead waiter stalls longer); on the other set-ups that time is measured (below), not judged. ")
	p("Network faults go through a TCP proxy per client (per node for Redis Cluster and the ZooKeeper ensemble); SQLite, which has no network, hangs the in-process client's calls instead. ")
	p("I5 is checked after every black hole, reset or SIGSTOP of a holder that outlasts ttl + transition + 2 s, and after every kill -9 of a holder: another contender must hold within that bound of the fault's start. ")
	p("Two exceptions stretch the bound. A fault in that window on a waiter (its calls cut, slowed or their replies dropped, its process stopped or killed) may leave a grant the store made it that it never heard of, which keeps everyone out until its transition ends: one more ttl + transition. On SQLite a process stopped inside a write transaction (a renewal, an acquire) holds the file's write lock, so nobody can take the lock until it resumes, however long ago its lease ended: the bound runs from the resume. That is inherent to an embedded store shared by processes through one file: a process that can be stopped (SIGSTOP, a debugger, a frozen container or VM) can stall every other contender for as long as it is stopped. ")
	p("I7 is checked per lane after everyone closed: the lock is free within ttl + transition + 2 s (the transition the store reports, when longer: ZooKeeper's is its session timeout); the test process is checked for leaked goroutines.\n\n")
	p("- S5 (client wall clock stepped) is not injected: CLOCK_REALTIME is one clock for the whole machine — stepping it steps the servers' clocks too, which is a server clock fault, not S5 — and a time namespace offsets only the monotonic clocks. The lease and every store's client measure time only through Go's monotonic readings (the Clock contract of package lease); expiry is the server's. ")
	p("For SQLite the server's clock *is* the machine's wall clock: a forward step of the machine clock shortens every held SQLite lease (the fence still rejects the stale holder).\n")
	p("- Server clock steps (S14) run the servers under libfaketime (integration/testserver's ServerClock): only the server's CLOCK_REALTIME moves, by 0.1–0.5 × the safety margin within the assumption and by 2 × the margin to 2 × (ttl + transition) beyond it; steps add up over a run. Redis runs with glibc's malloc under it (Debian's jemalloc recurses into libfaketime at start). ZooKeeper expires sessions on the JVM's monotonic clock, so a step does not touch its grants. SQLite has no server: its clock is the machine's, so the sqlite set-up's stores read it shifted by an offset they share (sqlstore.WithSQLiteClockOffset, read from a file before each statement, by the contender processes too), and the nemesis steps that offset.\n")
	p("- Redis restarts that keep data: SAVE, up to ttl + transition of serving on (its grants are lost), SHUTDOWN NOSAVE and a start from the snapshot; the append-only file turned on (appendfsync everysec), kill -9 and a start from it; FLUSHALL. A plain restart of a Redis set-up comes back empty.\n")
	p("- Known gap (found with these faults, narrowed in redisstore): after a FLUSHALL, or a restart that lost the record, Redis tokens continue from the server's clock in microseconds, but never below the highest token the acquiring process has seen (its token floor); when that clock was stepped back by more than the time since the lost grants, a process that had not seen the latest of their tokens can get a smaller token than theirs (I1). The campaign draws far backward steps and flushes on Redis, so a long run can report it.\n")
	p("- S7 (Redis failover with asynchronous replication) on the redis-replica set-up: a primary and one replica, which replicates through a proxy of its own; every client (in-process and process) reaches the primary through its proxy and counts a grant or renewal only once the replica acknowledged it (redisstore.WithWaitReplicas(1, 250ms), the documented assumption under which a promoted replica has every grant a holder counts on). ")
	p("A failover does what Sentinel does, with its detection time shortened: the replication link is black-holed, and the clients on the promoted side (each client at random, half of them; the holder among them or not) are moved to a black hole: the old primary is cut off from its replica and from them, while the others — a holder among them, the dangerous case — stay connected to the old primary, which goes on answering them (its writes reach no replica: WAIT returns 0). ")
	p("After up to ttl + transition (the detection), the replica is promoted (REPLICAOF NO ONE) and the promoted side's clients are moved to it (their proxies' target changes and their connections are reset, as a Sentinel-aware client does on +switch-master); it has no replica yet, so nobody's writes are acknowledged. ")
	p("After up to ttl + transition more (the partition heals), the old primary is demoted in one MULTI, as Sentinel reconfigures a returning old master (REPLICAOF the new primary, CLIENT KILL TYPE normal and pubsub): the clients that stayed reconnect, to the new primary; the episode ends once the old primary synced, and the next failover goes the other way. ")
	p("Beyond the assumption, and not injected: two replicas where the one promoted is not one that acknowledged, and clocks of primary and replica that disagree (they share the machine's clock here).\n")
	p("- S8 (ZooKeeper session expiry) happens whenever a ZooKeeper holder is black-holed past its session timeout (ttl + transition here).\n")
	p("- S11 (leader churn) is the campaign itself; S12 (bad input) is covered by the stores' and the lease's unit tests and fuzzing; the campaign adds one misconfiguration, on zookeeper-capped: a contender whose safety margin exceeds the longest grant the server allows must be refused (lease.ErrInvalidArgument or lease.ErrGrantTooShort) within a bound, without being granted and without a loop of store calls.\n")
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

// outcome says how the guarantees fare under a fault kind: survived,
// detected, or left to the fence (see WriteReport).
func outcome(kind string) string {
	switch kind {
	case FaultPauseHolder, FaultStopProc:
		return "only the fence: a holder that does not run is not told; its late write carries a stale token"
	case FaultRedisSnapshot, FaultRedisAOF:
		return "detected: a record from an earlier server life is held back for ttl + transition from the new life's start, past the cut-off holder's deadline"
	case FaultRedisFailover:
		return "survived: with WithWaitReplicas(1, …) a holder counts a grant or renewal only once the replica acknowledged it, so the promoted replica has every grant a holder counts on; renewals on the cut-off old primary go unacknowledged and the holder is told at its deadline"
	case FaultFlushAll:
		return "detected: the slot's epoch key is gone; record-less names are held back for ttl + transition"
	case FaultClockForward:
		return "survived: the safety margin absorbs the step"
	case FaultClockBackward, FaultClockFarBackward:
		return "survived: grants last longer on the server (a takeover comes later)"
	case FaultClockFarForward:
		return "beyond the assumption: overlaps possible; the fence judges the writes (the lease's step detector shortens deadlines once a reply shows the step)"
	case FaultAbandon:
		return "survived: the abandoned grant (kept live by renewals whose replies were lost) is never handed to the next Contender of the Manager, which contends at once: it waits for it to lapse or takes a greater token (I1); the callback's late writes carry the old token (the fence)"
	case FaultStopInside:
		return "survived: Stop returns at once; the grant is released after the callback returns"
	case FaultCloseInside:
		return "survived: Close returns at once; the grant is released after the callback returns, then a new Manager contends"
	case FaultKillHead:
		return "survived: the hand-off reserved for it lapses within the hand-off window; the next waiter is granted"
	case FaultKillWaiter:
		return "survived: its queue entry lapses; the next waiter is granted (I7 checks nothing is left behind)"
	case FaultKillProc:
		return "survived: the grant lapses and another contender takes over (I5)"
	case FaultKillPush:
		return "survived: waiters fall back to polling"
	case FaultPauseServer, FaultRestartSrv:
		return "survived: holders are told by their deadlines"
	default:
		return "survived: the holder is told by its deadline"
	}
}
