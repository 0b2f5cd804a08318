package rego

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/regopolicy"
	"kplane.dev/services/admission/internal/review"
)

// Root is the package of the admission policies.
const Root = "kplane.admission"

// PolicyLabel marks the ConfigMaps whose data values are admission
// policies.
const PolicyLabel = "kplane.dev/admission-policy"

// rules are what a write reads of each policy package.
var rules = []regopolicy.Rule{{Name: "deny", Kind: regopolicy.Messages}, {Name: "warn", Kind: regopolicy.Messages}}

// Config is where the policies come from.
type Config struct {
	// Dir is a directory of *.rego files; empty for none.
	Dir string
	// Client reads the ConfigMaps of Namespace labelled PolicyLabel=true;
	// nil for no ConfigMap source.
	Client    kubernetes.Interface
	Namespace string
	// Logger tells of reloads and of policies that do not compile; nil
	// for none.
	Logger *slog.Logger
}

// Policies decide writes with the policies in force. Validate is safe for
// concurrent use.
type Policies struct {
	engine *regopolicy.Engine
	// dir and cms are the sources; nil when not configured.
	dir *regopolicy.Dir
	cms *regopolicy.ConfigMaps
	// namespace holds the policy ConfigMaps, "" without them.
	namespace string
	log       *slog.Logger
}

// New builds the policies and loads the directory: a directory that
// cannot be read or does not compile fails it. Run follows the sources.
func New(cfg Config) (*Policies, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	engine, err := regopolicy.New(context.Background(), Root, rules,
		regopolicy.WithRootPackage(), regopolicy.WithLogger(log))
	if err != nil {
		return nil, err
	}
	p := &Policies{engine: engine, log: log}
	if cfg.Dir != "" {
		p.dir = regopolicy.NewDir(engine, cfg.Dir, log)
		if err := p.dir.Load(context.Background()); err != nil {
			return nil, fmt.Errorf("load admission policy directory %s: %w", cfg.Dir, err)
		}
	}
	if cfg.Client != nil {
		if cfg.Namespace == "" {
			return nil, errors.New("admission policy ConfigMaps: no namespace")
		}
		p.cms = regopolicy.NewConfigMaps(engine, cfg.Client, cfg.Namespace, PolicyLabel, log)
		p.namespace = cfg.Namespace
	}
	return p, nil
}

// Run follows the directory and the ConfigMaps until ctx ends.
func (p *Policies) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if p.dir != nil {
		wg.Go(func() {
			// Dir.Run logs its errors and returns only when ctx ends.
			_ = p.dir.Run(ctx, regopolicy.PollInterval)
		})
	}
	var cmsErr error
	if p.cms != nil {
		wg.Go(func() { cmsErr = p.cms.Run(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	return cmsErr
}

// HasSynced says whether the sources were read once: the directory (by
// New) and the ConfigMaps (listed by Run).
func (p *Policies) HasSynced() bool {
	return p.cms == nil || p.cms.HasSynced()
}

// MayValidate says whether any policy is in force: a policy may read
// anything of a write, so any one may act on every write.
func (p *Policies) MayValidate(*admissionv1.AdmissionRequest) bool {
	return !p.engine.Current().Empty()
}

// Validate evaluates the policies in force for a. A deny refuses the
// write with a Forbidden status error; a policy that fails refuses it
// with an InternalError. The warnings are returned in both cases.
func (p *Policies) Validate(ctx context.Context, a *review.Attributes) ([]string, error) {
	set := p.engine.Current()
	if set.Empty() || p.exempt(a) {
		return nil, nil
	}
	in, err := input(a)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("the Rego admission policies could not decide the write: %w", err))
	}
	res, err := set.Eval(ctx, in)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("the Rego admission policies could not decide the write: %w", err))
	}
	warnings := res.Messages("warn")
	if msgs := res.Messages("deny"); len(msgs) > 0 {
		gr := schema.GroupResource{Group: a.Request.Resource.Group, Resource: a.Request.Resource.Resource}
		return warnings, apierrors.NewForbidden(gr, a.Request.Name, errors.New(strings.Join(msgs, ", ")))
	}
	return warnings, nil
}

// exempt says whether a writes a policy ConfigMap, which the policies
// must not be able to lock.
func (p *Policies) exempt(a *review.Attributes) bool {
	r := a.Request
	if p.namespace == "" || r.Namespace != p.namespace || r.Resource.Group != "" || r.Resource.Resource != "configmaps" {
		return false
	}
	return labelled(a.Object) || labelled(a.OldObject)
}

func labelled(u *unstructured.Unstructured) bool {
	return u != nil && u.GetLabels()[PolicyLabel] == "true"
}

// input is a as the policies' input: the JSON of its AdmissionRequest,
// with the objects. The objects' maps are JSON already and are shared,
// not copied: evaluation only reads them.
func input(a *review.Attributes) (map[string]any, error) {
	req := *a.Request
	req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{}
	data, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// Numbers stay as written: an int64 does not lose digits as a float.
	dec.UseNumber()
	var in map[string]any
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("decode the request: %w", err)
	}
	in["object"], in["oldObject"] = content(a.Object), content(a.OldObject)
	return in, nil
}

// content is u's JSON map, nil (JSON null) for no object.
func content(u *unstructured.Unstructured) any {
	if u == nil {
		return nil
	}
	return u.Object
}
