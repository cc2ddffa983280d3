package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo hands leadership over six times, fairly, with growing tokens.
// It runs in a synctest bubble: on a loaded machine a waiter woken by a
// release could otherwise come later than its hand-off window and let the
// leader that just resigned lead again.
func TestHandoffDemo(t *testing.T) {
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		if err := run(&out); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
	})
	leads := regexp.MustCompile(`(\w+) +leads +token (\d+)`).FindAllStringSubmatch(out.String(), -1)
	if len(leads) != handoffs {
		t.Fatalf("%d leaders printed, want %d:\n%s", len(leads), handoffs, out.String())
	}
	var last uint64
	for i, l := range leads {
		tok, _ := strconv.ParseUint(l[2], 10, 64)
		if tok <= last {
			t.Errorf("leader %d has token %d after %d", i, tok, last)
		}
		last = tok
		if i > 0 && l[1] == leads[i-1][1] {
			t.Errorf("%s led twice in a row: the release must wake the next waiter", l[1])
		}
	}
}
