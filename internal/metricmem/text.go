package metricmem

import (
	"bufio"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// WriteText writes every instrument in the Prometheus text exposition
// format (version 0.0.4), named as the OpenTelemetry Prometheus exporter
// names them: dots become underscores, a unit "s" adds "_seconds",
// counters end in "_total"; units in braces ({lease}) add nothing.
func (p *Provider) WriteText(w io.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.insts))
	for n := range p.insts {
		names = append(names, n)
	}
	sort.Strings(names)
	b := bufio.NewWriter(w)
	for _, n := range names {
		writeInstrument(b, p.insts[n])
	}
	return b.Flush()
}

// PromName returns the Prometheus name of an instrument.
func PromName(name, unit string, counter bool) string {
	n := sanitize(name)
	if unit == "s" && !strings.HasSuffix(n, "_seconds") {
		n += "_seconds"
	}
	if counter {
		n += "_total"
	}
	return n
}

func writeInstrument(b *bufio.Writer, in *instrument) {
	name := PromName(in.name, in.unit, in.kind == counter)
	typ := map[kind]string{counter: "counter", upDown: "gauge", histogram: "histogram"}[in.kind]
	if in.desc != "" {
		b.WriteString("# HELP " + name + " " + escapeHelp(in.desc) + "\n")
	}
	b.WriteString("# TYPE " + name + " " + typ + "\n")
	ss := make([]*series, 0, len(in.series))
	for _, s := range in.series {
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, j int) bool { return labels(ss[i].attrs, "") < labels(ss[j].attrs, "") })
	for _, s := range ss {
		if in.kind != histogram {
			b.WriteString(name + labels(s.attrs, "") + " " + number(s.sum) + "\n")
			continue
		}
		var cum uint64
		for i, bound := range in.bounds {
			cum += s.buckets[i]
			b.WriteString(name + "_bucket" + labels(s.attrs, number(bound)) + " " + strconv.FormatUint(cum, 10) + "\n")
		}
		b.WriteString(name + "_bucket" + labels(s.attrs, "+Inf") + " " + strconv.FormatUint(s.count, 10) + "\n")
		b.WriteString(name + "_sum" + labels(s.attrs, "") + " " + number(s.sum) + "\n")
		b.WriteString(name + "_count" + labels(s.attrs, "") + " " + strconv.FormatUint(s.count, 10) + "\n")
	}
}

// labels formats an attribute set (and a bucket bound le, if not "") as
// {k="v",...}, or "" when empty.
func labels(set attribute.Set, le string) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, sanitize(string(kv.Key))+`="`+escapeValue(kv.Value.Emit())+`"`)
	}
	if le != "" {
		parts = append(parts, `le="`+le+`"`)
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// sanitize makes a metric or label name of s: characters other than
// letters, digits and underscores become underscores, and a leading digit
// gets one before it.
func sanitize(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			b.WriteString("_")
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func number(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

var (
	valueEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeValue(s string) string { return valueEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
