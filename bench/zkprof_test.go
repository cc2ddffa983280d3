//go:build linux

package bench

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

// TestZKProfile runs scenarios (b) and (b′) on the ZooKeeper targets in
// the order SIMBA_ZKPROF gives ("simba:b,zk:b,sleep:70s,simba:bs": target
// simba or zk, scenario b or bs; sleep waits), one server for all, and
// logs per cycle: the server's requests (srvr's Received), this process's
// read and write system calls and CPU time, and the server's node count
// before each step (the lock znodes that exist: simba's are containers,
// which the server removes about a minute after they empty; the recipe's
// parents stay). With SIMBA_ZKPROF_DIR it writes a CPU profile per step.
//
//	SIMBA_ZKPROF=simba:b,zk:b,simba:b,zk:b SIMBA_TEST_DOCKER=0 go test -run TestZKProfile -v .
func TestZKProfile(t *testing.T) {
	plan := os.Getenv("SIMBA_ZKPROF")
	if plan == "" {
		t.Skip("SIMBA_ZKPROF unset")
	}
	srv := testserver.ZooKeeper(t)
	s := Servers{ZooKeeper: strings.Join(srv.Servers(), ","), KeyPrefix: "prof" + srv.Root() + ":"}
	ts := map[string]Target{}
	for _, tg := range zkTargets(s) {
		ts[strings.Fields(tg.Lib)[0]] = tg
	}
	ctx := t.Context()
	if err := ts["simba"].Warm(ctx); err != nil {
		t.Fatal(err)
	}
	for i, step := range strings.Split(plan, ",") {
		lib, sc, _ := strings.Cut(step, ":")
		if lib == "sleep" {
			d, _ := time.ParseDuration(sc)
			time.Sleep(d)
			continue
		}
		t.Logf("node count before step %d: %d", i, nodeCount(t, srv.Servers()[0]))
		tg := ts[lib]
		e := env{t: tg, s: s}
		var f *os.File
		if dir := os.Getenv("SIMBA_ZKPROF_DIR"); dir != "" {
			f, _ = os.Create(fmt.Sprintf("%s/%d-%s-%s.pprof", dir, i, lib, sc))
			pprof.StartCPUProfile(f)
		}
		o0, _ := tg.Ops(ctx)
		r0, w0, c0 := procIO()
		vals, note, err := manyKeysRun(ctx, e, sc == "bs")
		r1, w1, c1 := procIO()
		o1, _ := tg.Ops(ctx)
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		fmt.Sscanf(note, "%f", &n)
		t.Logf("%d %s %s: %.0f cycles/s p50 %v p99 %v, %s, %.2f reqs/cycle, %.2f reads %.2f writes/cycle, %.1f µs CPU/cycle", i, lib, sc, vals[0],
			time.Duration(vals[1]*1e9), time.Duration(vals[2]*1e9), note, float64(o1-o0)/n, float64(r1-r0)/n, float64(w1-w0)/n, float64(c1-c0)/n/1e3)
	}
}

// procIO returns this process's read and write system calls and CPU time.
func procIO() (r, w int64, cpu time.Duration) {
	b, _ := os.ReadFile("/proc/self/io")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscr: "); ok {
			fmt.Sscan(v, &r)
		}
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			fmt.Sscan(v, &w)
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return
}

// nodeCount asks server for its node count (srvr).
func nodeCount(t *testing.T, server string) int {
	c, err := net.Dial("tcp", server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("srvr"))
	b, _ := io.ReadAll(c)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Node count: "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
