package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Report is what CheckHolds found.
type Report struct {
	Violations []Violation
	// Holds is how many holds were checked, Lost how many ended by loss.
	Holds, Lost int
	// Margin is the smallest gap between a hold's Done and the next
	// contender's Acquired on the same lock (math.MaxInt64 when no hold
	// followed another); LostMargin the same after holds that ended by
	// loss: how early the holder was told (I3).
	Margin, LostMargin time.Duration
}

// CheckHolds checks holds recorded on one clock (one process) against:
//
//   - I1: a hold whose acquire was sent after another hold of the same
//     lock had been acquired has a greater token, and no token is granted
//     twice;
//   - I3 and I6: the intervals [Acquired, Done] of holds of one lock never
//     overlap (an open hold lasts to the end of the run): a holder was told
//     of its loss before the next one learned of its grant. A Stopped hold
//     is not held to this: its process could not run to be told.
func CheckHolds(holds []Hold) Report {
	rep := Report{Holds: len(holds), Margin: math.MaxInt64, LostMargin: math.MaxInt64}
	byMutex := map[string][]Hold{}
	for _, h := range holds {
		byMutex[h.Mutex] = append(byMutex[h.Mutex], h)
		if h.Lost {
			rep.Lost++
		}
	}
	names := make([]string, 0, len(byMutex))
	for m := range byMutex {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		hs := byMutex[m]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Acquired < hs[j].Acquired })
		rep.Violations = append(rep.Violations, checkTokens(m, hs)...)
		vs, margin, lost := checkOverlap(m, hs)
		rep.Violations = append(rep.Violations, vs...)
		rep.Margin, rep.LostMargin = min(rep.Margin, margin), min(rep.LostMargin, lost)
	}
	return rep
}

// checkTokens checks I1 on the holds of one lock, sorted by Acquired.
func checkTokens(name string, hs []Hold) []Violation {
	var vs []Violation
	seen := map[uint64]Hold{}
	for _, h := range hs {
		if prev, ok := seen[h.Token]; ok {
			vs = append(vs, violation("I1", "%s: token %d granted to %s at %v and to %s at %v",
				name, h.Token, prev.Client, prev.Acquired, h.Client, h.Acquired))
		}
		seen[h.Token] = h
	}
	// best[i] is the hold with the greatest token among hs[:i+1].
	best := make([]int, len(hs))
	for i := range hs {
		best[i] = i
		if i > 0 && hs[best[i-1]].Token >= hs[i].Token {
			best[i] = best[i-1]
		}
	}
	for _, h := range hs {
		// Holds acquired before h's acquire was sent were granted before h.
		n, _ := slices.BinarySearchFunc(hs, h.Sent, func(x Hold, t time.Duration) int {
			if x.Acquired < t {
				return -1
			}
			return 1
		})
		if n == 0 {
			continue
		}
		if top := hs[best[n-1]]; top.Token >= h.Token {
			vs = append(vs, violation("I1", "%s: %s got token %d (sent at %v) after %s's token %d was acquired at %v",
				name, h.Client, h.Token, h.Sent, top.Client, top.Token, top.Acquired))
		}
	}
	return vs
}

// checkOverlap checks I3/I6 on the holds of one lock, sorted by
// Acquired, and returns the smallest gap from one Done to the next
// Acquired, overall and after a loss.
func checkOverlap(name string, hs []Hold) (vs []Violation, margin, lostMargin time.Duration) {
	margin, lostMargin = math.MaxInt64, math.MaxInt64
	last := -1 // the hold with the latest Done so far
	end := func(h Hold) time.Duration {
		if h.Done == Open {
			return math.MaxInt64
		}
		return h.Done
	}
	for i, h := range hs {
		if last >= 0 {
			prev := hs[last]
			if gap := h.Acquired - end(prev); end(prev) != math.MaxInt64 {
				margin = min(margin, gap)
				if prev.Lost {
					lostMargin = min(lostMargin, gap)
				}
			}
			if h.Acquired < end(prev) {
				v := violation("I6", "%s: %s acquired token %d at %v while %s (token %d, acquired at %v) held until %s%s",
					name, h.Client, h.Token, h.Acquired, prev.Client, prev.Token, prev.Acquired, doneString(prev.Done), howEnded(prev))
				v.At = h.Acquired
				vs = append(vs, v)
			}
		}
		if !h.Stopped && (last < 0 || end(h) > end(hs[last])) {
			last = i // a stopped holder's Done is late by its stop: the fence judges it
		}
	}
	return vs, margin, lostMargin
}

func doneString(d time.Duration) string {
	if d == Open {
		return "the end of the run"
	}
	return d.String()
}

// howEnded tells how a hold in a violation ended: released or lost, and
// its deadline where known.
func howEnded(h Hold) string {
	switch {
	case h.Done == Open:
		return ""
	case !h.Lost:
		return " (released)"
	case h.Deadline != 0:
		return fmt.Sprintf(" (lost; its deadline was %v)", h.Deadline)
	}
	return " (lost)"
}
