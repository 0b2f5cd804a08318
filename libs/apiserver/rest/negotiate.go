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

// Media types the layer writes. Every handler's server speaks JSON, YAML
// and protobuf, as kube-apiserver's negotiated serializers do, custom
// resources' included; an object goes out in protobuf only when its kind
// has generated protobuf code or it is converted to a meta.k8s.io kind
// that has (PartialObjectMetadata, PartialObjectMetadataList), as kube's
// endpoint restrictions allow.
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

// offer is what a handler's objects can be written as besides JSON and
// YAML, kube's endpoint restrictions.
type offer struct {
	// protobuf: the kind has generated protobuf code (kube's
	// StandardSerializers include protobuf; a custom resource's do not).
	protobuf bool
	// table: the resource has a table (kube's TableConvertor), which
	// every stored resource has and the reviews do not.
	table bool
	// errors are what a Status may be written as: any of the server's
	// media types, with no conversion (kube's
	// DefaultEndpointRestrictions, which its errors negotiate with).
	errors bool
}

// offerOf is what a handler of r can answer with, worked out once per
// handler rather than per request.
func offerOf(r *resource.Resource) offer {
	return offer{protobuf: slices.Contains(r.Objects.MediaTypes(), kubeproto.MediaType), table: r.Stored()}
}

// errorOffer is what an error of any handler may be written as.
var errorOffer = offer{errors: true}

// The server's media types in kube's order, as a 406 lists them.
var (
	acceptedMediaTypes       = []string{mediaJSON, mediaYAML, kubeproto.MediaType}
	acceptedStreamMediaTypes = []string{mediaJSON + ";stream=watch", kubeproto.StreamMediaType}
)

// notAcceptable is kube-apiserver's 406 for an Accept header it cannot
// satisfy, listing what its server could have sent.
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

// format is one of the server's media types, in kube's order of
// preference for a wildcard.
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

// streams says the format has a watch framing: YAML has none.
func (f format) streams() bool { return f != formatYAML }

// negotiate picks the response form for req as kube-apiserver's
// NegotiateOutputMediaType does: the first Accept clause (by quality)
// that one of the server's media types matches, trying JSON, YAML, then
// protobuf, and that o allows; no Accept header means JSON. A watch
// (stream) negotiates the same way, as kube's list handler does before it
// knows the request watches, and then needs a format with a watch
// framing: the clause chosen is not passed over for a later one.
func negotiate(req *http.Request, stream bool, o offer) (output, error) {
	out, f, ok := negotiateAccept(req.Header.Get("Accept"), o)
	if !ok {
		return output{}, notAcceptable(acceptedMediaTypes...)
	}
	if stream && !f.streams() {
		return output{}, notAcceptable(acceptedStreamMediaTypes...)
	}
	if !out.pretty && !out.protobuf && prettyByDefault(req) {
		out.pretty = true
	}
	return out, nil
}

func negotiateAccept(header string, o offer) (output, format, bool) {
	if header == "" {
		return output{}, formatJSON, true
	}
	for _, clause := range goautoneg.ParseAccept(header) {
		for _, f := range []format{formatJSON, formatYAML, formatProtobuf} {
			if !f.matches(clause) {
				continue
			}
			if out, ok := acceptParams(clause.Params, f, o); ok {
				out.yaml, out.protobuf = f == formatYAML, f == formatProtobuf
				return out, f, true
			}
		}
	}
	return output{}, formatJSON, false
}

// acceptParams reads a clause's parameters as kube's
// acceptMediaTypeOptions does; a conversion or format o does not allow
// makes the clause unacceptable, so a later clause may win.
func acceptParams(params map[string]string, f format, o offer) (output, bool) {
	var out output
	var gvk schema.GroupVersionKind
	convert := false
	for k, v := range params {
		switch k {
		case "as":
			gvk.Kind, convert = v, true
		case "g":
			gvk.Group, convert = v, true
		case "v":
			gvk.Version, convert = v, true
		case "stream":
			// A stream parameter is harmless on a request that does
			// not stream, as in kube.
			if v != "" && (v != "watch" || !f.streams()) {
				return output{}, false
			}
		case "pretty":
			out.pretty = v == "1"
		}
	}
	if !convert {
		return out, o.errors || f != formatProtobuf || o.protobuf
	}
	if o.errors {
		return output{}, false
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
		// Typed meta.k8s.io kinds: protobuf even of a custom resource.
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
