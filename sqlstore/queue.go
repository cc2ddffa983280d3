package sqlstore

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"strconv"
	"sync"
)

// The wait queue of a lock lives in its row (column queue): entries of
// entryLen characters, oldest first, each a contender's key (keyLen
// letters a-p) and the epoch ms at which the entry expires (13 digits).
// Keys are letters and times digits, so a search for a key only ever finds
// a whole key, and times compare as strings. The statements of each
// dialect (queries/) edit it; this file reads it.
const (
	keyLen   = 16
	expLen   = 13
	entryLen = keyLen + expLen
	// maxQueue is how many entries a queue holds at most (3712 bytes, the
	// MySQL column's size); a loser beyond that is not queued and polls.
	maxQueue = 128
)

// contenderKey is the queue key of contender: 16 letters a-p spelling the
// first 8 bytes of its SHA-256.
func contenderKey(contender string) string { return taggedKey("", contender) }

// taggedKey is the queue key of contender in a Store with tag (letters
// a-p, shorter than a key): the tag, then letters spelling the SHA-256 of
// contender up to keyLen. On PostgreSQL the tag names the Store's
// notification channel, so that a release notifies only the Store of the
// waiter it hands the lock to.
func taggedKey(tag, contender string) string {
	sum := sha256.Sum256([]byte(contender))
	b := make([]byte, keyLen)
	copy(b, tag)
	for i := len(tag); i < keyLen; i++ {
		b[i] = 'a' + sum[i/2]>>(4*(1-i%2))&0xf
	}
	return string(b)
}

// newTag returns n random letters a-p: a PostgreSQL Store's tag.
func newTag(n int) string {
	r := make([]byte, n)
	_, _ = rand.Read(r) // never fails (crypto/rand)
	for i := range r {
		r[i] = 'a' + r[i]&0xf
	}
	return string(r)
}

// queued is a queue as a statement returned it.
type queued string

// len is the number of entries.
func (q queued) len() int { return len(q) / entryLen }

// key returns the key of entry i.
func (q queued) key(i int) string { return string(q[i*entryLen : i*entryLen+keyLen]) }

// index returns the position of key in q, or -1.
func (q queued) index(key string) int {
	for i := range q.len() {
		if q.key(i) == key {
			return i
		}
	}
	return -1
}

// live reports whether an entry expires after now (epoch ms).
func (q queued) live(now int64) bool {
	for i := range q.len() {
		e := q[i*entryLen+keyLen : (i+1)*entryLen]
		if exp, err := strconv.ParseInt(string(e), 10, 64); err == nil && exp > now {
			return true
		}
	}
	return false
}

// head returns the key of the first entry, or "".
func (q queued) head() string {
	if q.len() == 0 {
		return ""
	}
	return q.key(0)
}

// next returns the key of the second entry, or "".
func (q queued) next() string {
	if q.len() < 2 {
		return ""
	}
	return q.key(1)
}

// pred returns whom the entry of key waits behind: the entry before it,
// or, for the first entry, the owner (by its key; "" when the lock has
// none). ok is false when key is not queued.
func (q queued) pred(key, owner string) (pred string, ok bool) {
	switch i := q.index(key); {
	case i < 0:
		return "", false
	case i > 0:
		return q.key(i - 1), true
	case owner != "":
		return contenderKey(owner), true
	default:
		return "", true
	}
}

// maxWaits bounds the waitSet: a waiter beyond it is not queued (it polls).
const maxWaits = 1 << 16

// waitSet remembers the (lock, contender) pairs this Store may have
// queued, so that a Release that only withdraws (token 0) costs a
// statement only when there is something to withdraw.
type waitSet struct {
	mu    sync.Mutex
	m     map[[2]string]struct{}
	limit int // the most pairs it holds; 0: maxWaits
}

// add records a pair; false when the set is full.
func (w *waitSet) add(name, contender string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := [2]string{name, contender}
	if _, ok := w.m[k]; ok {
		return true
	}
	if len(w.m) >= cmp.Or(w.limit, maxWaits) {
		return false
	}
	if w.m == nil {
		w.m = map[[2]string]struct{}{}
	}
	w.m[k] = struct{}{}
	return true
}

// has reports whether a pair is recorded.
func (w *waitSet) has(name, contender string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.m[[2]string{name, contender}]
	return ok
}

func (w *waitSet) remove(name, contender string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, [2]string{name, contender})
}

// take removes a pair and reports whether it was there.
func (w *waitSet) take(name, contender string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := [2]string{name, contender}
	_, ok := w.m[k]
	delete(w.m, k)
	return ok
}
