package redisstore

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestParseLife reads what the acquire script's life needs from INFO
// server, a negative uptime (a clock stepped back past the start)
// included, and refuses a reply without it.
func TestParseLife(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nrun_id:2bddde772019f35b3d1c2f4f15d7b76b0755aae4\r\n" +
		"server_time_usec:1795463917316922\r\nuptime_in_seconds:12\r\n"
	l, err := parseLife(info)
	if err != nil || l != (life{runID: "2bddde772019f35b", uptime: 12, nowUS: 1795463917316922}) {
		t.Fatalf("parseLife = %+v, %v", l, err)
	}
	stepped := "run_id:2bddde772019f35b3d1c\r\nuptime_in_seconds:-3590\r\n"
	if l, err := parseLife(stepped); err != nil || l.uptime != -3590 {
		t.Fatalf("parseLife(%q) = %+v, %v", stepped, l, err)
	}
	for _, bad := range []string{"", "run_id:xyz\r\nuptime_in_seconds:1\r\n", "run_id:2bddde772019f35b3d1c\r\n",
		"run_id:2bddde772019f35b3d1c\r\nuptime_in_seconds:x\r\n"} {
		if _, err := parseLife(bad); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("parseLife(%q) error %v, want ErrUnexpectedReply", bad, err)
		}
	}
}

// TestSlotTags: every epoch tag hashes to its slot, so a script may touch
// the epoch key of its lock's slot on Redis Cluster.
func TestSlotTags(t *testing.T) {
	tags := slotTags()
	for slot, n := range tags {
		key := "p:{~" + strconv.FormatUint(uint64(n), 36) + "}:epoch"
		if got := slotOf(key); int(got) != slot {
			t.Fatalf("epoch tag of slot %d hashes to %d", slot, got)
		}
	}
	if got := slotOf("123456789"); got != 0x31C3%16384 { // CRC-16/XMODEM check value
		t.Fatalf("slotOf(123456789) = %d", got)
	}
}

// TestParseMessage reads what the scripts publish and refuses the rest.
func TestParseMessage(t *testing.T) {
	for p, want := range map[string]message{
		"g\x0042\x00a|b":     {kind: 'g', token: 42, owner: "a|b"},
		"r\x00h\x00n\x00100": {kind: 'r', head: "h", next: "n", win: 100 * time.Millisecond},
		"r\x00\x00\x000":     {kind: 'r'},
		"w\x00h\x00\x001000": {kind: 'w', head: "h", win: time.Second},
	} {
		if got, ok := parseMessage(p); !ok || got != want {
			t.Errorf("parseMessage(%q) = %+v, %v; want %+v", p, got, ok, want)
		}
	}
	for _, bad := range []string{"", "g", "g\x000\x00a", "g\x001\x00", "x\x00a\x00b\x001", "w\x00\x00n\x001", "r\x00h\x00n", "rr\x00h\x00n\x001"} {
		if m, ok := parseMessage(bad); ok {
			t.Errorf("parseMessage(%q) = %+v, want refused", bad, m)
		}
	}
}

// TestRecordKey: the record key made in one allocation, and the epoch key
// of its slot, are those the key layout names, for any name, with and
// without a prefix, outside and on Redis Cluster (whose epoch key follows
// the slot); the scripts name the lock's other keys from the record key.
func TestRecordKey(t *testing.T) {
	single, err := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), WithKeyPrefix("app:"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{single, cluster} {
		for _, name := range []string{"a", "orders/42", "{x}:y", strings.Repeat("é", 127), strings.Repeat("z", 255)} {
			base := s.cfg.prefix + "{" + base64.RawURLEncoding.EncodeToString([]byte(name)) + "}"
			epoch := s.cfg.prefix + "{~}:epoch"
			if s.cluster != nil {
				epoch = s.cfg.prefix + "{~" + strconv.FormatUint(uint64(slotTags()[slotOf(base)]), 36) + "}:epoch"
			}
			rk := s.recordKey(name)
			if rk != base+":r" {
				t.Errorf("recordKey(%q) = %q, want %q", name, rk, base+":r")
			}
			if got := s.epochOf(rk); got != any(epoch) {
				t.Errorf("epochOf(%q) = %q, want %q", rk, got, epoch)
			}
			if got, want := s.grantKey(name, 1795463917316923, "c:1"), base+":g:1795463917316923:c:1"; got != want {
				t.Errorf("grantKey(%q) = %q, want %q", name, got, want)
			}
		}
	}
}

// TestDecodeAcquire: the fast path's reply, the token alone, is a grant to
// the caller for what it asked; a token that is not a positive integer is
// refused; the full script's array still decodes.
func TestDecodeAcquire(t *testing.T) {
	rec, err := decodeAcquire("1795463917316923", "c", 500, 300)
	if err != nil || rec.OwnerID != "c" || rec.Token != 1795463917316923 ||
		rec.TTL != 500*time.Millisecond || rec.Transition != 800*time.Millisecond {
		t.Fatalf("decodeAcquire(token) = %+v, %v", rec, err)
	}
	for _, bad := range []any{"0", "", "-1", "1e15", int64(7)} {
		if _, err := decodeAcquire(bad, "c", 500, 300); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("decodeAcquire(%v) error %v, want ErrUnexpectedReply", bad, err)
		}
	}
	rec, err = decodeAcquire([]any{"d", "9", int64(500), int64(800)}, "c", 500, 300)
	if err != nil || rec.OwnerID != "d" || rec.Token != 9 {
		t.Fatalf("decodeAcquire(array) = %+v, %v", rec, err)
	}
}

// TestFloorRaise: the floor only rises, keeps the value as the reply
// carried it (an integer reply is sent as its decimal string) and ignores
// tokens Lua cannot count exactly.
func TestFloorRaise(t *testing.T) {
	var f floor
	steps := []struct {
		tok  uint64
		v    any
		want any
	}{
		{0, nil, "0"},
		{5, "5", "5"},
		{3, "3", "5"},
		{9, int64(9), "9"},
		{maxExact, "9007199254740992", "9"},
		{maxExact - 1, "9007199254740991", "9007199254740991"},
	}
	for _, s := range steps {
		f.raise(s.tok, s.v)
		if got := f.get(); got != s.want {
			t.Fatalf("after raise(%d): floor %v, want %v", s.tok, got, s.want)
		}
	}
}
