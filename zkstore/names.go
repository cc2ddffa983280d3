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

// ErrCorrupt: a node in a lock's queue holds data this package did not
// write (or another version wrote). Get fails with it rather than guess;
// a waiter behind such a node reports the contender its name carries,
// with the waiter's own timings.
var ErrCorrupt = errors.New("zkstore: unreadable lock node")

// maxRoot bounds the root path.
const maxRoot = 1024

// escape writes s as one znode name: every byte outside [A-Za-z0-9_~]
// becomes %XX. The result holds no '.', '/', '-' or character ZooKeeper
// refuses, so it is never "." or "..", and distinct inputs give distinct
// outputs ('%' itself is escaped). Names stay readable for operators.
// A name with nothing to escape is returned as is.
func escape(s string) string {
	n := escapedLen(s)
	if n == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(n)
	writeEscaped(&b, s)
	return b.String()
}

// escapedLen returns the length of escape(s).
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			n += 2
		}
	}
	return n
}

// writeEscaped writes escape(s) to b.
func writeEscaped(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

// childPath returns dir + "/" + escape(name) + suffix, in one allocation:
// every call builds its lock's znode path, and every create its node's.
func childPath(dir, name, suffix string) string {
	var b strings.Builder
	b.Grow(len(dir) + 1 + escapedLen(name) + len(suffix))
	b.WriteString(dir)
	b.WriteByte('/')
	writeEscaped(&b, name)
	b.WriteString(suffix)
	return b.String()
}

// plain reports whether escape keeps c as it is.
func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '~'
}

// unescape inverts escape: ok is false for text escape cannot produce
// (so escape(id) == s whenever ok). Text without escapes is returned as
// is: listings parse every node's name.
func unescape(s string) (id string, ok bool) {
	n := 0 // escapes
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			if i+2 >= len(s) {
				return "", false
			}
			v, ok1 := unhex(s[i+1])
			w, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 || plain(v<<4|w) {
				return "", false
			}
			n++
			i += 2
		case !plain(c):
			return "", false
		}
	}
	if n == 0 {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s) - 2*n)
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		v, _ := unhex(s[i+1])
		w, _ := unhex(s[i+2])
		b.WriteByte(v<<4 | w)
		i += 2
	}
	return b.String(), true
}

// unhex reads one upper-case hex digit, as escape writes them.
func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// splitRoot returns the elements of a valid root path.
func splitRoot(root string) []string { return strings.Split(root[1:], "/") }

// dirOf returns the znode under which contenders for lock queue.
func (s *Store) dirOf(name string) string { return childPath(s.root, name, "") }

// nodePrefix is the path contender's nodes in the lock znode dir are
// created at, before the sequence number the server appends: the
// escaped id and a '-', which escape never emits, so the last '-' of a
// node name always starts its sequence number.
func nodePrefix(dir, contender string) string { return childPath(dir, contender, "-") }

// child is one node of a lock's queue.
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
	id, ok := unescape(name[:i]) // only names escape writes
	if !ok || id == "" {
		return child{}, false
	}
	return child{name: name, contender: id, seq: seq}, true
}

// grant is the data of a contender's node: who, and the timings it
// asked for. Nothing else is written to a node: who owns follows from the
// order of the queue, and holders renew without writing.
type grant struct {
	contender       string
	ttl, transition time.Duration
}

// dataMagic starts every node's data. Version 1 (before renewals without
// writes) is not read: see the package documentation on mixing versions.
const dataMagic = "simba2"

// encode writes g as text: a version line, ttl and transition in
// milliseconds, then the contender id (which may hold any byte but NUL,
// so it comes last), in one allocation: every Acquire that creates a
// node encodes its grant.
func (g grant) encode() []byte {
	b := make([]byte, 0, len(dataMagic)+2*21+3+len(g.contender))
	b = append(b, dataMagic+"\n"...)
	b = strconv.AppendInt(b, g.ttl.Milliseconds(), 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, g.transition.Milliseconds(), 10)
	b = append(b, '\n')
	return append(b, g.contender...)
}

// decodeGrant parses a node's data; errors wrap ErrCorrupt.
func decodeGrant(b []byte) (grant, error) {
	f := strings.SplitN(string(b), "\n", 4)
	if len(f) != 4 || f[0] != dataMagic || f[3] == "" || !utf8.ValidString(f[3]) {
		return grant{}, fmt.Errorf("%w: %q", ErrCorrupt, truncate(b))
	}
	ttl, err1 := strconv.ParseInt(f[1], 10, 64)
	tr, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || ttl <= 0 || tr < 0 || ttl > maxMs || tr > maxMs {
		return grant{}, fmt.Errorf("%w: %q", ErrCorrupt, truncate(b))
	}
	return grant{contender: f[3], ttl: time.Duration(ttl) * time.Millisecond,
		transition: time.Duration(tr) * time.Millisecond}, nil
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
