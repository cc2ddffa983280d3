package zkstore

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrCorrupt: a node in a mutex's queue holds data this package did not
// write (or a newer version wrote). Get fails with it rather than guess;
// Acquire treats such a node as a waiter with the caller's timings, so it
// blocks the mutex for one ttl + transition at most.
var ErrCorrupt = errors.New("zkstore: unreadable lock node")

// maxRoot bounds the root path.
const maxRoot = 1024

// escape writes s as one znode name: every byte outside [A-Za-z0-9_~]
// becomes %XX. The result holds no '.', '/', '-' or character ZooKeeper
// refuses, so it is never "." or "..", and distinct inputs give distinct
// outputs ('%' itself is escaped). Names stay readable for operators.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// unescape inverts escape; ok is false for text escape cannot produce.
func unescape(s string) (string, bool) {
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

// dirOf returns the znode under which contenders for mutex queue.
func (s *Store) dirOf(mutex string) string { return s.root + "/" + escape(mutex) }

// prefixOf is the name of contender's nodes before the sequence number
// the server appends: the escaped id and a '-', which escape never emits,
// so the last '-' of a node name always starts its sequence number.
func prefixOf(contender string) string { return escape(contender) + "-" }

// child is one node of a mutex's queue.
type child struct {
	name      string
	contender string
	seq       int64
}

// parseChild reads a node name written by this package.
func parseChild(name string) (child, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return child{}, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return child{}, false
	}
	id, ok := unescape(name[:i])
	if !ok || id == "" || escape(id) != name[:i] { // only names escape writes
		return child{}, false
	}
	return child{name: name, contender: id, seq: seq}, true
}

// grant is the data of a contender's node.
type grant struct {
	contender       string
	ttl, transition time.Duration
	// claimed: the contender's Acquire took the mutex with this node. A
	// lowest node that is not claimed is a waiter whose turn has come.
	claimed bool
}

const dataMagic = "simba1"

// encode writes g as text: a version line, ttl and transition in
// milliseconds, the claim flag, then the contender id (which may hold any
// byte but NUL, so it comes last).
func (g grant) encode() []byte {
	c := 0
	if g.claimed {
		c = 1
	}
	return fmt.Appendf(nil, "%s\n%d\n%d\n%d\n%s", dataMagic, g.ttl.Milliseconds(), g.transition.Milliseconds(), c, g.contender)
}

// decodeGrant parses a node's data; errors wrap ErrCorrupt.
func decodeGrant(b []byte) (grant, error) {
	f := strings.SplitN(string(b), "\n", 5)
	if len(f) != 5 || f[0] != dataMagic || (f[3] != "0" && f[3] != "1") || f[4] == "" || !utf8.ValidString(f[4]) {
		return grant{}, fmt.Errorf("%w: %q", ErrCorrupt, truncate(b))
	}
	ttl, err1 := strconv.ParseInt(f[1], 10, 64)
	tr, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || ttl <= 0 || tr < 0 || ttl > maxMs || tr > maxMs {
		return grant{}, fmt.Errorf("%w: %q", ErrCorrupt, truncate(b))
	}
	return grant{contender: f[4], ttl: time.Duration(ttl) * time.Millisecond,
		transition: time.Duration(tr) * time.Millisecond, claimed: f[3] == "1"}, nil
}

// maxMs bounds the durations read from a node (about 10 years).
const maxMs = int64(10 * 365 * 24 * time.Hour / time.Millisecond)

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// validRoot reports why p cannot be the root path, or nil.
func validRoot(p string) error {
	bad := func(why string) error { return fmt.Errorf("root path %q: %s", p, why) }
	switch {
	case p == "" || p[0] != '/':
		return bad("not absolute")
	case p == "/":
		return bad("the top level is ZooKeeper's own")
	case len(p) > maxRoot:
		return bad(fmt.Sprintf("longer than %d bytes", maxRoot))
	case p[len(p)-1] == '/':
		return bad("ends with '/'")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/"):
		return bad("under ZooKeeper's reserved /zookeeper")
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return bad("empty, '.' or '..' element")
		}
	}
	for _, r := range p {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 {
			return bad(fmt.Sprintf("character %U that ZooKeeper refuses", r))
		}
	}
	if path.Clean(p) != p {
		return bad("not clean")
	}
	return nil
}
