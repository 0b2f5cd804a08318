package regopolicy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/prometheus/client_golang/prometheus"
)

// Kind is what a rule holds.
type Kind int

const (
	// Messages is a set of strings.
	Messages Kind = iota
	// Boolean is true or undefined.
	Boolean
)

// Rule is a rule read of every policy package that defines it.
type Rule struct {
	Name string
	Kind Kind
}

// Sink takes the modules of a source: what Dir and ConfigMaps feed.
type Sink interface {
	// SetSource replaces the modules (by name, unique across sources) of
	// source.
	SetSource(ctx context.Context, source string, modules map[string]string) error
}

// Engine holds the set of policies in force. It is safe for concurrent
// use: SetSource calls are serialised, Current never waits.
type Engine struct {
	root      ast.Ref
	allowRoot bool
	rules     []Rule
	log       *slog.Logger
	changed   func(source string)
	reloads   *prometheus.CounterVec
	reg       prometheus.Registerer

	// mu serialises SetSource; Current reads current without it.
	mu      sync.Mutex
	sources map[string]map[string]string
	current atomic.Pointer[Set]
}

var _ Sink = (*Engine)(nil)

// Option changes an Engine.
type Option func(*Engine)

// WithLogger sets where compile errors and reloads are logged.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithOnChange calls f, with the source that changed, each time a new set
// is in force.
func WithOnChange(f func(source string)) Option { return func(e *Engine) { e.changed = f } }

// WithRootPackage lets modules use the root package itself, not only the
// packages under it.
func WithRootPackage() Option { return func(e *Engine) { e.allowRoot = true } }

// WithMetrics registers with reg the counter
// kplane_<subsystem>_policy_reloads_total{result="success"|"failure"}.
func WithMetrics(reg prometheus.Registerer, subsystem string) Option {
	return func(e *Engine) {
		e.reg = reg
		e.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: subsystem, Name: "policy_reloads_total",
			Help: "Changes of the Rego policies, by result: success (in force) or failure (did not compile; the last good set stays).",
		}, []string{"result"})
	}
}

// New returns an engine with no modules for the policies under the
// package root (dotted, without "data.") that define rules.
func New(ctx context.Context, root string, rules []Rule, opts ...Option) (*Engine, error) {
	ref, err := ast.ParseRef("data." + root)
	if err != nil {
		return nil, fmt.Errorf("parse root package %q: %w", root, err)
	}
	e := &Engine{
		root:    ref,
		rules:   slices.Clone(rules),
		log:     slog.New(slog.DiscardHandler),
		changed: func(string) {},
		sources: map[string]map[string]string{},
	}
	for _, o := range opts {
		o(e)
	}
	if e.reg != nil {
		if err := e.reg.Register(e.reloads); err != nil {
			return nil, fmt.Errorf("register policy metrics: %w", err)
		}
	}
	empty, err := e.compile(ctx, nil)
	if err != nil {
		return nil, err
	}
	e.current.Store(empty)
	return e, nil
}

// Current is the set in force.
func (e *Engine) Current() *Set { return e.current.Load() }

// SetSource replaces the modules of source and compiles all modules. When
// they do not compile, the error is logged and returned and the last good
// set stays in force; the source's new modules are kept, so that the next
// change of any source compiles them again. An unchanged source (a new
// one without modules included) compiles nothing.
func (e *Engine) SetSource(ctx context.Context, source string, modules map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if maps.Equal(e.sources[source], modules) {
		return nil
	}
	e.sources[source] = maps.Clone(modules)
	all := map[string]string{}
	for _, src := range e.sources {
		maps.Copy(all, src)
	}
	set, err := e.compile(ctx, all)
	if err != nil {
		e.count("failure")
		e.log.Error("Rego policies do not compile; the last good set stays in force", "source", source, "err", err)
		return fmt.Errorf("compile Rego policies: %w", err)
	}
	e.current.Store(set)
	e.count("success")
	e.log.Info("Rego policies in force", "source", source, "modules", set.modules)
	e.changed(source)
	return nil
}

func (e *Engine) count(result string) {
	if e.reloads != nil {
		e.reloads.WithLabelValues(result).Inc()
	}
}

// Set is a compiled set of modules. It is immutable.
type Set struct {
	query rego.PreparedEvalQuery
	rules []Rule
	// vars maps each rule to the query variable of each package defining
	// it, by package path ("data." included).
	vars    map[string]map[string]string
	modules int
	// inputRefs are the references to input the modules make; wholeInput
	// says that some module uses input otherwise (as a value, or with a
	// non-constant key), which may read any of it.
	inputRefs  []ast.Ref
	wholeInput bool
}

// compile compiles modules (by name) into one prepared query, or says what
// is wrong with them. It does not change what is in force.
func (e *Engine) compile(ctx context.Context, modules map[string]string) (*Set, error) {
	opts := []func(*rego.Rego){}
	var inputs []*ast.Module
	packages := map[string]map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		m, err := ast.ParseModuleWithOpts(name, modules[name], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, err
		}
		path := m.Package.Path
		if !path.HasPrefix(e.root) || (len(path) == len(e.root) && !e.allowRoot) {
			return nil, fmt.Errorf("%s: package %s is %s", name, strings.TrimPrefix(path.String(), "data."), e.wherePackages())
		}
		defined := packages[path.String()]
		if defined == nil {
			defined = map[string]bool{}
			packages[path.String()] = defined
		}
		for _, r := range m.Rules {
			defined[r.Head.Name.String()] = true
			if len(r.Head.Reference) > 0 {
				defined[r.Head.Reference[0].Value.String()] = true
			}
		}
		opts = append(opts, rego.ParsedModule(m))
		inputs = append(inputs, m)
	}
	s := &Set{rules: e.rules, vars: map[string]map[string]string{}, modules: len(modules)}
	for _, m := range inputs {
		s.noteInputRefs(m)
	}
	var body []string
	for i, pkg := range slices.Sorted(maps.Keys(packages)) {
		for j, r := range e.rules {
			if !packages[pkg][r.Name] {
				continue
			}
			v := fmt.Sprintf("r%d_%d", i, j)
			if s.vars[r.Name] == nil {
				s.vars[r.Name] = map[string]string{}
			}
			s.vars[r.Name][pkg] = v
			switch r.Kind {
			case Messages:
				body = append(body, fmt.Sprintf("%s := [m | some m in %s.%s]", v, pkg, r.Name))
			case Boolean:
				body = append(body, fmt.Sprintf("%s := [true | %s.%s == true]", v, pkg, r.Name))
			default:
				return nil, fmt.Errorf("rule %s: unknown kind %d", r.Name, r.Kind)
			}
		}
	}
	if len(body) == 0 {
		// No module defines a rule read: an empty query still has to be
		// prepared, so that evaluation needs no special case.
		body = append(body, "true")
	}
	opts = append(opts, rego.Query(strings.Join(body, "; ")))
	q, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	s.query = q
	return s, nil
}

func (e *Engine) wherePackages() string {
	root := strings.TrimPrefix(e.root.String(), "data.")
	if e.allowRoot {
		return "neither " + root + " nor under it"
	}
	return "not under " + root
}

// noteInputRefs records how m reads input. Every reference to input has
// input as its head variable; a use of input not at the head of a
// reference is the whole document.
func (s *Set) noteInputRefs(m *ast.Module) {
	refs := 0
	ast.WalkRefs(m, func(r ast.Ref) bool {
		if r.HasPrefix(ast.InputRootRef) {
			refs++
			s.inputRefs = append(s.inputRefs, r)
		}
		return false
	})
	vars := 0
	ast.WalkVars(m, func(v ast.Var) bool {
		if v.Equal(ast.InputRootDocument.Value) {
			vars++
		}
		return false
	})
	if vars > refs {
		s.wholeInput = true
	}
}

// ReadsInput says whether some module may read input at path (keys of
// nested objects): a reference to it, to a part of it, to a document
// containing it, or through a key computed at evaluation.
func (s *Set) ReadsInput(path ...string) bool {
	if s.wholeInput {
		return true
	}
	for _, r := range s.inputRefs {
		if refMayRead(r[1:], path) {
			return true
		}
	}
	return false
}

func refMayRead(keys ast.Ref, path []string) bool {
	for i, k := range keys {
		if i == len(path) {
			// A part of the document at path.
			return true
		}
		str, ok := k.Value.(ast.String)
		if !ok {
			// A computed key may be any.
			return true
		}
		if string(str) != path[i] {
			return false
		}
	}
	// The document at path or one containing it.
	return true
}

// Empty says whether no module defines any rule read: evaluating the set
// would decide nothing.
func (s *Set) Empty() bool { return len(s.vars) == 0 }

// Defines says whether some module defines rule.
func (s *Set) Defines(rule string) bool { return len(s.vars[rule]) > 0 }

// Modules is the number of modules compiled.
func (s *Set) Modules() int { return s.modules }

// Result is what an evaluation read of every rule.
type Result struct {
	messages map[string][]string
	packages map[string][]string
}

// Messages is the strings of every package's Messages rule called rule,
// sorted, without duplicates.
func (r *Result) Messages(rule string) []string { return r.messages[rule] }

// Packages is the packages (dotted, without "data.") whose Boolean rule
// called rule is true, sorted.
func (r *Result) Packages(rule string) []string { return r.packages[rule] }

// Eval evaluates the set with input, which OPA reads as JSON (a
// map[string]any of JSON values is read without a round trip).
func (s *Set) Eval(ctx context.Context, input any) (*Result, error) {
	rs, err := s.query.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return nil, fmt.Errorf("evaluate Rego policies: %w", err)
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("evaluate Rego policies: %d results, want 1", len(rs))
	}
	res := &Result{messages: map[string][]string{}, packages: map[string][]string{}}
	for _, r := range s.rules {
		for pkg, v := range s.vars[r.Name] {
			values, _ := rs[0].Bindings[v].([]any)
			switch r.Kind {
			case Messages:
				for _, m := range values {
					msg, ok := m.(string)
					if !ok {
						return nil, fmt.Errorf("evaluate Rego policies: %s.%s holds %T, want strings", strings.TrimPrefix(pkg, "data."), r.Name, m)
					}
					res.messages[r.Name] = append(res.messages[r.Name], msg)
				}
			case Boolean:
				if len(values) > 0 {
					res.packages[r.Name] = append(res.packages[r.Name], strings.TrimPrefix(pkg, "data."))
				}
			}
		}
		if msgs := res.messages[r.Name]; msgs != nil {
			slices.Sort(msgs)
			res.messages[r.Name] = slices.Compact(msgs)
		}
		slices.Sort(res.packages[r.Name])
	}
	return res, nil
}
