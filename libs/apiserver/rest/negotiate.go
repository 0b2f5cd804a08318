package rest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/munnerz/goautoneg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/kubeproto"
	"kplane.dev/libs/apiserver/resource"
)

// Media types the layer writes. Protobuf is offered only for kinds with
// generated protobuf code, as kube-apiserver offers it.
const (
	mediaJSON = "application/json"
	mediaYAML = "application/yaml"
)

// output is the response form negotiated from a request's Accept header.
type output struct {
	// yaml writes YAML instead of JSON; protobuf writes Kubernetes
	// protobuf.
	yaml, protobuf bool
	// pretty indents JSON, as kube does for ?pretty=true and for curl or
	// browsers.
	pretty bool
	// as is the meta.k8s.io kind the object is converted to (Table,
	// PartialObjectMetadata, PartialObjectMetadataList); nil sends the
	// object itself.
	as *schema.GroupVersionKind
}

// offer is what a handler can answer with besides JSON and YAML.
type offer struct {
	// protobuf: the kind has generated protobuf code.
	protobuf bool
	// table: the resource has a table (kube's TableConvertor), which
	// every stored resource has and the reviews do not.
	table bool
}

// offerOf is what a handler of r can answer with, worked out once per
// handler rather than per request.
func offerOf(r *resource.Resource) offer {
	return offer{protobuf: slices.Contains(r.Objects.MediaTypes(), kubeproto.MediaType), table: r.Stored()}
}

// notAcceptable is kube-apiserver's 406 for an Accept header it cannot
// satisfy, listing what it could have sent.
func notAcceptable(accepted ...string) error {
	return notAcceptableMessage("only the following media types are accepted: " + strings.Join(accepted, ", "))
}

func notAcceptableMessage(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: msg,
	}}
}

// format is one way of writing a response, in kube's order of preference
// for a wildcard.
type format int

const (
	formatJSON format = iota
	formatYAML
	formatProtobuf
)

func (f format) matches(clause goautoneg.Accept) bool {
	if clause.Type == "*" && clause.SubType == "*" {
		return true
	}
	if clause.Type != "application" {
		return false
	}
	if clause.SubType == "*" {
		return true
	}
	return clause.SubType == [...]string{"json", "yaml", "vnd.kubernetes.protobuf"}[f]
}

// negotiate picks the response form for req as kube-apiserver does: the
// first Accept clause (by quality) the handler can serve wins, each
// clause trying JSON, YAML, then protobuf; no Accept header means JSON. A
// stream (watch) is JSON or protobuf.
func negotiate(req *http.Request, stream bool, o offer) (output, error) {
	out, ok := negotiateAccept(req.Header.Get("Accept"), stream, o)
	if !ok {
		if stream {
			accepted := []string{mediaJSON + ";stream=watch"}
			if o.protobuf {
				accepted = append(accepted, kubeproto.StreamMediaType)
			}
			return output{}, notAcceptable(accepted...)
		}
		accepted := []string{mediaJSON, mediaYAML}
		if o.protobuf {
			accepted = append(accepted, kubeproto.MediaType)
		}
		return output{}, notAcceptable(accepted...)
	}
	if !out.pretty && !out.protobuf && prettyByDefault(req) {
		out.pretty = true
	}
	return out, nil
}

func negotiateAccept(header string, stream bool, o offer) (output, bool) {
	if header == "" {
		return output{}, true
	}
	for _, clause := range goautoneg.ParseAccept(header) {
		for _, f := range []format{formatJSON, formatYAML, formatProtobuf} {
			if (f == formatYAML && stream) || (f == formatProtobuf && !o.protobuf) || !f.matches(clause) {
				continue
			}
			if out, ok := acceptParams(clause.Params, stream, f, o); ok {
				out.yaml, out.protobuf = f == formatYAML, f == formatProtobuf
				return out, true
			}
		}
	}
	return output{}, false
}

// acceptParams reads a clause's parameters; a conversion the layer does not
// offer makes the clause unacceptable, so a later clause may win.
func acceptParams(params map[string]string, stream bool, f format, o offer) (output, bool) {
	var out output
	var gvk schema.GroupVersionKind
	for k, v := range params {
		switch k {
		case "as":
			gvk.Kind = v
		case "g":
			gvk.Group = v
		case "v":
			gvk.Version = v
		case "stream":
			if v != "" && (v != "watch" || !stream) {
				return output{}, false
			}
		case "pretty":
			out.pretty = v == "1"
		}
	}
	if gvk.Empty() {
		return out, true
	}
	if gv := gvk.GroupVersion(); gv != metav1.SchemeGroupVersion && gv != metav1beta1.SchemeGroupVersion {
		return output{}, false
	}
	switch gvk.Kind {
	case "Table":
		// kube writes tables as JSON or YAML only, and only for
		// resources with a table.
		if !o.table || f == formatProtobuf {
			return output{}, false
		}
	case "PartialObjectMetadata", "PartialObjectMetadataList":
	default:
		return output{}, false
	}
	out.as = &gvk
	return out, true
}

// prettyByDefault is kube's rule for indenting output: ?pretty=true, or a
// human's client (curl, wget, a browser) unless ?pretty=false.
func prettyByDefault(req *http.Request) bool {
	if p := req.URL.Query().Get("pretty"); p != "" {
		b, _ := strconv.ParseBool(p)
		return b
	}
	ua := req.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}
