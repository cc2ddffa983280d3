package zkstore

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// oldParse is parseChild as it was before it parsed names in place: a
// reference for TestParseChildSame.
func oldParse(name string) (child, bool) {
	unesc := func(s string) (string, bool) {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c != '%' {
				b.WriteByte(c)
				continue
			}
			if i+2 >= len(s) {
				return "", false
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", false
			}
			b.WriteByte(byte(v))
			i += 2
		}
		return b.String(), true
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return child{}, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return child{}, false
	}
	id, ok := unesc(name[:i])
	if !ok || id == "" || escape(id) != name[:i] {
		return child{}, false
	}
	return child{name: name, contender: id, seq: seq}, true
}

// TestParseChildSame: node names parse as they did when unescape made a
// copy of every name and escape checked it.
func TestParseChildSame(t *testing.T) {
	alphabet := []byte("aZ09_~%-/.+ fF2A\x00\xff")
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, r.IntN(10))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		name := string(b) + "-" + strconv.Itoa(r.IntN(100))
		got, gok := parseChild(name)
		want, wok := oldParse(name)
		if got != want || gok != wok {
			t.Fatalf("parseChild(%q) = %+v, %v; was %+v, %v", name, got, gok, want, wok)
		}
		if id := string(b); id != "" {
			if c, ok := parseChild(escape(id) + "-7"); !ok || c.contender != id {
				t.Fatalf("parseChild(escape(%q)) = %+v, %v", id, c, ok)
			}
		}
	}
}

// sink keeps what a test builds on the heap, as the Store's callers do.
var sink string

// TestNamesAllocs (issue 19): a plain lock name and contender id are
// escaped, and a node name parsed, with no allocation; an escaped one in
// one.
func TestNamesAllocs(t *testing.T) {
	for _, c := range []struct {
		what string
		want float64
		f    func()
	}{
		{"escape plain", 0, func() { _ = escape("worker_7") }},
		{"escape", 1, func() { _ = escape("bench/cycle") }},
		{"parseChild plain", 0, func() { _, _ = parseChild("worker_7-0000000042") }},
		{"parseChild", 1, func() { _, _ = parseChild("bench%2Fcycle-0000000042") }},
		{"dirOf", 1, func() { sink = (&Store{root: "/simba"}).dirOf("bench/cycle") }},
		{"nodePrefix", 1, func() { sink = nodePrefix("/simba/bench%2Fcycle", "worker 7") }},
		{"newQueue", 1, func() { _ = newQueue("/simba/x", []string{"b-0000000002", "a-0000000001"}) }},
	} {
		if n := testing.AllocsPerRun(100, c.f); n != c.want {
			t.Errorf("%s: %.0f allocations, want %.0f", c.what, n, c.want)
		}
	}
}
