package requestinfo

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Info describes a request as an authorizer and a router see it.
type Info struct {
	// IsResourceRequest is false for discovery, health and other
	// non-resource paths.
	IsResourceRequest bool
	// Path is the URL path as sent.
	Path string
	// Verb is a Kubernetes verb for resource requests (get, list, watch,
	// create, update, patch, delete, deletecollection) and the lowercase
	// HTTP method otherwise.
	Verb string
	// APIPrefix is "api" or "apis".
	APIPrefix   string
	APIGroup    string
	APIVersion  string
	Namespace   string
	Resource    string
	Subresource string
	Name        string
	// Parts are the path segments after the version (and after watch/),
	// and after namespaces/<ns>/ when that names the namespace the
	// resource lives in.
	Parts []string
	// WatchPath is true for the legacy /watch/ paths.
	WatchPath bool
	// InNamespace is true when the path puts the resource under a
	// namespace (/namespaces/<ns>/<resource>...). It is false for the
	// paths of a namespace itself (/api/v1/namespaces/<name>[/status]),
	// whose Namespace kube fills with the namespace's own name.
	InNamespace bool
}

// GroupVersionResource returns the request's group, version and resource.
func (i *Info) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: i.APIGroup, Version: i.APIVersion, Resource: i.Resource}
}

// namespaceSubresources are the subresources of a namespace itself: for
// /api/v1/namespaces/x/status the resource is namespaces, not "status" in
// namespace x.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// verbsByMethod maps HTTP methods to the verbs of single-object requests.
var verbsByMethod = map[string]string{
	http.MethodPost:   "create",
	http.MethodGet:    "get",
	http.MethodHead:   "get",
	http.MethodPut:    "update",
	http.MethodPatch:  "patch",
	http.MethodDelete: "delete",
}

// Parse reads the request info of method and u, as kube-apiserver's
// RequestInfoFactory does: paths that are not /api/<v>/<resource>... or
// /apis/<g>/<v>/<resource>... are non-resource requests, and of those only
// the fields kube fills are filled.
func Parse(method string, u *url.URL) *Info {
	info := &Info{Path: u.Path, Verb: strings.ToLower(method)}
	parts := splitPath(u.Path)
	// The shortest resource path is /api/<v>/<resource>.
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return info
	}
	info.APIPrefix = parts[0]
	parts = parts[1:]
	if info.APIPrefix == "apis" {
		// /apis/<group>/<version> alone is discovery.
		if len(parts) < 3 {
			return info
		}
		info.APIGroup = parts[0]
		parts = parts[1:]
	}
	info.APIVersion = parts[0]
	parts = parts[1:]
	info.IsResourceRequest = true

	verb, known := verbsByMethod[method]
	if !known {
		verb = strings.ToLower(method)
	}
	if parts[0] == "watch" {
		// Legacy watch paths: /api/v1/watch/namespaces/x/configmaps.
		verb = "watch"
		info.WatchPath = true
		parts = parts[1:]
	}
	info.Verb = verb

	if len(parts) > 0 && parts[0] == "namespaces" {
		if len(parts) > 1 {
			info.Namespace = parts[1]
			if len(parts) > 2 && !namespaceSubresources[parts[2]] {
				parts = parts[2:]
				info.InNamespace = true
			}
		}
	}
	info.Parts = parts
	if len(parts) >= 3 {
		info.Subresource = parts[2]
	}
	if len(parts) >= 2 {
		info.Name = parts[1]
	}
	if len(parts) >= 1 {
		info.Resource = parts[0]
	}

	if info.Name == "" && info.Verb == "get" {
		opts := ListOptions(u.Query())
		info.Verb = "list"
		if opts.Watch {
			info.Verb = "watch"
		}
		// A list or watch selecting one name by field selector is about
		// that name, which lets authorization by resourceNames allow it.
		if opts.FieldSelector != nil {
			if name, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); ok && len(path.IsValidPathSegmentName(name)) == 0 {
				info.Name = name
			}
		}
	}
	if info.Name == "" && info.Verb == "delete" {
		info.Verb = "deletecollection"
	}
	return info
}

// ListOptions reads a collection GET's query as kube's RequestInfoFactory
// does, to tell a list from a watch: decoded by the meta.k8s.io parameter
// codec, where a boolean is false only for "0" and "false" (in any case)
// and anything else, a bare ?watch included, is true. A query the codec
// refuses reads as empty options except for watch, read by the same rule. The gateway authorizes and the storage services serve by this
// one reading, so a request authorized as a list is never served as a
// watch.
func ListOptions(q url.Values) *metainternalversion.ListOptions {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, opts); err != nil {
		opts = &metainternalversion.ListOptions{}
		if values := q["watch"]; len(values) > 0 {
			switch strings.ToLower(values[0]) {
			case "false", "0":
			default:
				opts.Watch = true
			}
		}
	}
	return opts
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// Operation names what the request does without the names in its path,
// as a span name: "create configmaps", "get pods/log", and for a
// non-resource request its verb and path ("get /healthz").
func (i *Info) Operation() string {
	if !i.IsResourceRequest {
		return i.Verb + " " + i.Path
	}
	if i.Subresource != "" {
		return i.Verb + " " + i.Resource + "/" + i.Subresource
	}
	return i.Verb + " " + i.Resource
}

// SpanName is the Operation of r, in the shape of otelhttp's span name
// formatter (the operation it is given is ignored).
func SpanName(_ string, r *http.Request) string { return Parse(r.Method, r.URL).Operation() }
