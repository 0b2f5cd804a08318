package rest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/munnerz/goautoneg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Media types the layer writes. Protobuf is not among them: clients that
// prefer it (client-go does) list JSON after it and get JSON.
const (
	mediaJSON = "application/json"
	mediaYAML = "application/yaml"
)

// output is the response form negotiated from a request's Accept header.
type output struct {
	// yaml writes YAML instead of JSON.
	yaml bool
	// pretty indents JSON, as kube does for ?pretty=true and for curl or
	// browsers.
	pretty bool
	// as is the meta.k8s.io kind the object is converted to (Table,
	// PartialObjectMetadata, PartialObjectMetadataList); nil sends the
	// object itself.
	as *schema.GroupVersionKind
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

// negotiate picks the response form for req as kube-apiserver does: the
// first Accept clause (by quality) the layer can serve wins; no Accept
// header means JSON. A stream (watch) can only be JSON.
func negotiate(req *http.Request, stream bool) (output, error) {
	out, ok := negotiateAccept(req.Header.Get("Accept"), stream)
	if !ok {
		if stream {
			return output{}, notAcceptable(mediaJSON + ";stream=watch")
		}
		return output{}, notAcceptable(mediaJSON, mediaYAML)
	}
	if !out.pretty && prettyByDefault(req) {
		out.pretty = true
	}
	return out, nil
}

func negotiateAccept(header string, stream bool) (output, bool) {
	if header == "" {
		return output{}, true
	}
	for _, clause := range goautoneg.ParseAccept(header) {
		for _, yaml := range []bool{false, true} {
			if yaml && stream {
				continue
			}
			subtype := "json"
			if yaml {
				subtype = "yaml"
			}
			if !(clause.Type == "*" && clause.SubType == "*") &&
				!(clause.Type == "application" && (clause.SubType == subtype || clause.SubType == "*")) {
				continue
			}
			if out, ok := acceptParams(clause.Params, stream); ok {
				out.yaml = yaml
				return out, true
			}
		}
	}
	return output{}, false
}

// acceptParams reads a clause's parameters; a conversion the layer does not
// offer makes the clause unacceptable, so a later clause may win.
func acceptParams(params map[string]string, stream bool) (output, bool) {
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
	case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
		out.as = &gvk
		return out, true
	}
	return output{}, false
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
