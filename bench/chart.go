package bench

import (
	"fmt"
	"math"
	"strings"
)

// renderChart draws docs/benchmarks-handoff.svg by hand: per target, the
// hand-off gap (p50 bars, p99 ticks) for each K, and the waiter load, both
// on log scales.
func renderChart(tables []Table) string {
	byID := map[string]Table{}
	for _, t := range tables {
		byID[t.ID] = t
	}
	type series struct {
		name, color string
		t           Table
	}
	var hand []series
	for i, k := range []string{"c2", "c8", "c32"} {
		if t, ok := byID[k]; ok {
			hand = append(hand, series{"K = " + strings.TrimPrefix(k, "c"), []string{"#4e79a7", "#f28e2b", "#59a14f"}[i], t})
		}
	}
	load, hasLoad := byID["d"]

	// The targets in report order, from whichever table has rows.
	var rows []Row
	if len(hand) > 0 {
		rows = sortRows(hand[0].t.Rows)
	} else if hasLoad {
		rows = sortRows(load.Rows)
	}
	const (
		labelW, panelW, gapW = 190, 330, 40
		top, rowH, barH      = 60, 34, 7
	)
	width := labelW + panelW + gapW + panelW + 20
	height := top + rowH*len(rows) + 50
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	if len(rows) == 0 {
		p(`<text x="10" y="20">no hand-off or waiter-load results in this run</text></svg>` + "\n")
		return b.String()
	}

	// Hand-off panel.
	var vals []float64
	for _, s := range hand {
		for _, r := range s.t.Rows {
			vals = append(vals, r.Values[1], r.Values[2])
		}
	}
	x0 := float64(labelW)
	ax := newLogAxis(vals, x0, panelW)
	p(`<text x="%d" y="18" font-size="13" font-weight="bold">Hand-off gap (bar p50, tick p99)</text>`+"\n", labelW)
	for i, s := range hand {
		lx := labelW + i*90
		p(`<rect x="%d" y="28" width="10" height="10" fill="%s"/><text x="%d" y="37">%s</text>`+"\n", lx, s.color, lx+14, s.name)
	}
	ax.draw(p, top, top+rowH*len(rows), formatDuration)
	for j, r := range rows {
		y := top + j*rowH
		p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+rowH/2+4, xmlEscape(r.Target.Lib+" · "+r.Target.Backend))
		for i, s := range hand {
			v := rowOf(s.t, r.Target)
			by := y + 4 + i*(barH+2)
			if v == nil || math.IsNaN(v[1]) {
				p(`<text x="%.1f" y="%d" font-size="8" fill="#999">—</text>`+"\n", x0+2, by+barH)
				continue
			}
			p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: p50 %s, p99 %s</title></rect>`+"\n",
				x0, by, ax.pos(v[1])-x0, barH, s.color, xmlEscape(r.Target.ID()), s.name, formatDuration(v[1]), formatDuration(v[2]))
			if !math.IsNaN(v[2]) {
				p(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", ax.pos(v[2]), ax.pos(v[2]), by-1, by+barH+1, s.color)
			}
		}
	}

	// Waiter-load panel.
	if hasLoad {
		var lv []float64
		for _, r := range load.Rows {
			lv = append(lv, r.Values[0])
		}
		lx0 := float64(labelW + panelW + gapW)
		la := newLogAxis(lv, lx0, panelW)
		p(`<text x="%.0f" y="18" font-size="13" font-weight="bold">Waiter load: server ops/s, %d waiters</text>`+"\n", lx0, waiters)
		la.draw(p, top, top+rowH*len(rows), func(v float64) string {
			if v >= 1000 {
				return thousands(v)
			}
			return fmt.Sprintf("%g", v)
		})
		for j, r := range rows {
			v := rowOf(load, r.Target)
			y := top + j*rowH + rowH/2 - 6
			if v == nil || math.IsNaN(v[0]) {
				p(`<text x="%.1f" y="%d" fill="#999">—</text>`+"\n", lx0+2, y+10)
				continue
			}
			p(`<rect x="%.1f" y="%d" width="%.1f" height="12" fill="#af7aa1"><title>%s: %s ops/s</title></rect>`+"\n",
				lx0, y, la.pos(v[0])-lx0, xmlEscape(r.Target.ID()), format(Rate, v[0]))
			p(`<text x="%.1f" y="%d" font-size="9">%s</text>`+"\n", la.pos(v[0])+3, y+10, format(Rate, v[0]))
		}
	}
	p(`<text x="%d" y="%d" fill="#666">Log scales; bars start at the axis. A dash: not measured (see docs/benchmarks.md).</text>`+"\n", labelW, height-12)
	p("</svg>\n")
	return b.String()
}

// rowOf returns the values of target t in table tab, or nil.
func rowOf(tab Table, t Target) []float64 {
	for _, r := range tab.Rows {
		if r.Target.ID() == t.ID() {
			return r.Values
		}
	}
	return nil
}

// logAxis maps positive values on whole decades to x positions.
type logAxis struct {
	lo, hi float64 // decades (log10)
	x0, w  float64
}

func newLogAxis(vals []float64, x0 float64, w int) logAxis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v > 0 && !math.IsNaN(v) {
			lo, hi = min(lo, math.Log10(v)), max(hi, math.Log10(v))
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi <= lo {
		hi = lo + 1
	}
	return logAxis{lo: lo, hi: hi, x0: x0, w: float64(w)}
}

// pos returns the x position of v; values below the axis sit at its start.
func (a logAxis) pos(v float64) float64 {
	if v <= 0 {
		return a.x0
	}
	f := (math.Log10(v) - a.lo) / (a.hi - a.lo)
	return a.x0 + a.w*max(0, min(1, f))
}

// draw writes the decade grid lines from y0 to y1 and their labels.
func (a logAxis) draw(p func(string, ...any), y0, y1 int, label func(float64) string) {
	for d := a.lo; d <= a.hi; d++ {
		x := a.pos(math.Pow(10, d))
		p(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>`+"\n", x, x, y0, y1)
		p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", x, y1+14, label(math.Pow(10, d)))
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
