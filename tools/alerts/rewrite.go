// Package alerts proves the chart's alert rules on a live Prometheus
// (`make test-alerts`). This file holds the one change the test makes to the
// rules: it compresses time, so that alerts written for minutes fire and
// resolve in seconds.
package alerts

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Change is one duration the rewrite shortened.
type Change struct {
	Rule  string // alert or record name; the group's name for its interval
	Field string // "for", "keep_firing_for", "interval" or "expr"
	From  string
	To    string
}

// Rewritten is a rule file after the rewrite.
type Rewritten struct {
	YAML    []byte
	Changes []Change
	// Longest is the longest rewritten `for`/`keep_firing_for`, and Window the
	// longest rewritten range window: together how long an alert can take
	// to fire or to resolve after its condition changes.
	Longest, Window time.Duration
}

// Rewrite divides every duration in a Prometheus rule file by scale: each
// rule's `for` and `keep_firing_for`, each group's `interval`, and in each
// `expr` every range window (`rate(x[5m])`) and subquery range and step.
// Nothing else changes: the expressions are parsed with Prometheus's own
// PromQL parser, the ranges in the syntax tree are scaled, and the tree is
// printed back, so an expression differs from the original only in its
// ranges (and in Prometheus's canonical spacing). Offsets, @ modifiers and
// duration arithmetic are refused rather than guessed at. The result is
// checked with Prometheus's own rule-file validation.
func Rewrite(src []byte, scale int64) (*Rewritten, error) {
	if scale < 1 {
		return nil, fmt.Errorf("scale %d: want at least 1", scale)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("not a single YAML document")
	}
	out := &Rewritten{}
	groups := field(doc.Content[0], "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return nil, errors.New("no groups list")
	}
	p := parser.NewParser(parser.Options{})
	for _, g := range groups.Content {
		gname := scalar(field(g, "name"))
		if n := field(g, "interval"); n != nil {
			if err := scaleDuration(out, n, gname, "interval", scale, nil); err != nil {
				return nil, err
			}
		}
		rules := field(g, "rules")
		if rules == nil {
			continue
		}
		for _, r := range rules.Content {
			name := scalar(field(r, "alert"))
			if name == "" {
				name = scalar(field(r, "record"))
			}
			for _, key := range []string{"for", "keep_firing_for"} {
				if n := field(r, key); n != nil {
					if err := scaleDuration(out, n, name, key, scale, &out.Longest); err != nil {
						return nil, err
					}
				}
			}
			n := field(r, "expr")
			if n == nil {
				return nil, fmt.Errorf("%s: no expr", name)
			}
			expr, err := p.ParseExpr(n.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ranges, err := scaleRanges(expr, time.Duration(scale))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			for _, from := range slices.Sorted(maps.Keys(ranges)) {
				to := ranges[from]
				out.Window = max(out.Window, to)
				out.Changes = append(out.Changes, Change{Rule: name, Field: "expr",
					From: "[" + model.Duration(from).String() + "]", To: "[" + model.Duration(to).String() + "]"})
			}
			n.Value = expr.String() + "\n"
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	out.YAML = buf.Bytes()
	if _, errs := rulefmt.Parse(out.YAML, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler)); len(errs) > 0 {
		return nil, fmt.Errorf("rewritten rules invalid: %w", errors.Join(errs...))
	}
	return out, nil
}

// scaleRanges divides every range in expr by scale, in place, and returns
// each distinct original range with its replacement.
func scaleRanges(expr parser.Expr, scale time.Duration) (map[time.Duration]time.Duration, error) {
	seen := map[time.Duration]time.Duration{}
	var err error
	div := func(d time.Duration) time.Duration {
		to := d / scale
		if to < time.Second || d%scale != 0 {
			err = errors.Join(err, fmt.Errorf("range %s does not divide by %d into whole milliseconds of at least 1s", model.Duration(d), scale))
		}
		seen[d] = to
		return to
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.MatrixSelector:
			if n.RangeExpr != nil {
				err = errors.Join(err, fmt.Errorf("duration expression in %s: not rewritten", n))
				return nil
			}
			n.Range = div(n.Range)
		case *parser.SubqueryExpr:
			if n.RangeExpr != nil || n.StepExpr != nil || n.OriginalOffsetExpr != nil || n.OriginalOffset != 0 || n.Timestamp != nil || n.StartOrEnd != 0 {
				err = errors.Join(err, fmt.Errorf("offset, @ or duration expression in %s: not rewritten", n))
				return nil
			}
			n.Range = div(n.Range)
			if n.Step != 0 {
				n.Step = div(n.Step)
			}
		case *parser.VectorSelector:
			if n.OriginalOffsetExpr != nil || n.OriginalOffset != 0 || n.Timestamp != nil || n.StartOrEnd != 0 {
				err = errors.Join(err, fmt.Errorf("offset or @ in %s: not rewritten", n))
			}
		}
		return nil
	})
	return seen, err
}

func scaleDuration(out *Rewritten, n *yaml.Node, rule, key string, scale int64, longest *time.Duration) error {
	d, err := model.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", rule, key, err)
	}
	to := model.Duration(int64(d) / scale)
	if int64(d)%scale != 0 || (d != 0 && time.Duration(to) < time.Second) {
		return fmt.Errorf("%s: %s %s does not divide by %d into at least 1s", rule, key, d, scale)
	}
	out.Changes = append(out.Changes, Change{Rule: rule, Field: key, From: d.String(), To: to.String()})
	n.Value = to.String()
	if longest != nil {
		*longest = max(*longest, time.Duration(to))
	}
	return nil
}

// field returns the value node of key in a YAML mapping, or nil.
func field(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}
