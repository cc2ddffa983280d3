package lease

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTTLTransitionOverflow(t *testing.T) {
	_, err := newConfig([]Option{WithTTL(math.MaxInt64), WithTransition(time.Hour)})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("ttl + transition past the limit: %v, want an overflow error", err)
	}
}

func TestDefaultContenderIDIsValid(t *testing.T) {
	id := defaultContenderID()
	if err := ValidateContenderID(id); err != nil {
		t.Errorf("default id %q: %v", id, err)
	}
	if id2 := defaultContenderID(); id2 == id {
		t.Errorf("two Managers got the same default id %q", id)
	}
	// A long multibyte host name is cut on a rune boundary.
	for _, host := range []string{strings.Repeat("é", 40), strings.Repeat("x", 63) + "é", "ab\xff"} {
		got := trimHost(host, 64)
		if !utf8.ValidString(got) || len(got) > 64 || !strings.HasPrefix(host, got) {
			t.Errorf("trimHost(%q) = %q (%d bytes)", host, got, len(got))
		}
	}
}
