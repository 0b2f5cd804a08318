package grafana

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// dashboard is kplane.json, the file Grafana imports.
//
//go:embed kplane.json
var dashboard []byte

// Query is one PromQL expression of the dashboard.
type Query struct {
	// Panel is the title of the panel that draws it.
	Panel string
	Expr  string
}

// Queries returns every query of the dashboard, in panel order.
func Queries() ([]Query, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("read kplane.json: %w", err)
	}
	var qs []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			qs = append(qs, Query{Panel: p.Title, Expr: t.Expr})
		}
	}
	return qs, nil
}

// Selector is a metric a query reads.
type Selector struct {
	// Metric is the name of the series read: for a histogram, with its
	// _bucket, _sum or _count suffix, as the series are exported.
	Metric string
	// Job is the job an equality matcher job="..." names, the service
	// whose metric it is; "" when the selector names no single job.
	Job string
}

// grouping are the keywords followed by a list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// keywords are PromQL's words that name no metric wherever they stand.
var keywords = map[string]bool{"bool": true, "offset": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true}

// Selectors returns the metrics expr reads, in order.
func Selectors(expr string) ([]Selector, error) {
	var out []Selector
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i = skipVariable(expr, i)
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at %d in %q", i, expr)
			}
			i += end + 1
		case c == '{':
			// A selector without a metric name ({__name__=...}) names
			// nothing this reads.
			_, end, err := matchers(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case isDigit(c) || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := skipSpace(expr, i)
			switch {
			case grouping[word]:
				if next < len(expr) && expr[next] == '(' {
					end := strings.IndexByte(expr[next:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed label list after %s in %q", word, expr)
					}
					i = next + end + 1
				}
			case keywords[strings.ToLower(word)]:
			case next < len(expr) && expr[next] == '(', groupedAggregation(expr, next):
				// A function or an aggregation; its arguments follow.
			default:
				sel := Selector{Metric: word}
				if next < len(expr) && expr[next] == '{' {
					job, end, err := matchers(expr, next)
					if err != nil {
						return nil, err
					}
					sel.Job, i = job, end
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	return out, nil
}

// groupedAggregation reports whether expr continues at i with by or
// without: the word before it is an aggregation (sum by (le) (...)).
func groupedAggregation(expr string, i int) bool {
	end := i
	for end < len(expr) && isIdent(expr[end]) {
		end++
	}
	w := expr[i:end]
	return w == "by" || w == "without"
}

// matchers reads the label matchers that open at expr[i] ('{') and
// returns the job an equality matcher names and the index after '}'.
func matchers(expr string, i int) (job string, end int, err error) {
	i++
	for {
		i = skipSpace(expr, i)
		if i >= len(expr) {
			return "", 0, fmt.Errorf("unclosed { in %q", expr)
		}
		switch {
		case expr[i] == '}':
			return job, i + 1, nil
		case expr[i] == ',':
			i++
			continue
		}
		start := i
		for i < len(expr) && isIdent(expr[i]) {
			i++
		}
		name := expr[start:i]
		i = skipSpace(expr, i)
		opStart := i
		for i < len(expr) && strings.IndexByte("=!~", expr[i]) >= 0 {
			i++
		}
		op := expr[opStart:i]
		i = skipSpace(expr, i)
		if name == "" || op == "" || i >= len(expr) || (expr[i] != '"' && expr[i] != '\'' && expr[i] != '`') {
			return "", 0, fmt.Errorf("bad label matcher at %d in %q", start, expr)
		}
		valueEnd, err := skipString(expr, i)
		if err != nil {
			return "", 0, err
		}
		if name == "job" && op == "=" {
			job = expr[i+1 : valueEnd-1]
		}
		i = valueEnd
	}
}

// skipString returns the index after the string literal at expr[i].
func skipString(expr string, i int) (int, error) {
	quote := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && quote != '`':
			j++
		case expr[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d in %q", i, expr)
}

// skipVariable returns the index after the Grafana variable at expr[i]:
// $name or ${name}.
func skipVariable(expr string, i int) int {
	i++
	if i < len(expr) && expr[i] == '{' {
		if end := strings.IndexByte(expr[i:], '}'); end >= 0 {
			return i + end + 1
		}
	}
	for i < len(expr) && isIdent(expr[i]) {
		i++
	}
	return i
}

func skipSpace(expr string, i int) int {
	for i < len(expr) && strings.IndexByte(" \t\n\r", expr[i]) >= 0 {
		i++
	}
	return i
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
