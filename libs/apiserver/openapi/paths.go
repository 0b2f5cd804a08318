package openapi

import (
	"bytes"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/resource"
)

// Definitions of the apimachinery types that paths refer to.
const (
	defStatus        = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	defDeleteOptions = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	defWatchEvent    = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"
	defPatch         = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	defScale         = "io.k8s.api.autoscaling.v1.Scale"
	defObjectMeta    = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	defListMeta      = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
)

// Extensions kube-apiserver sets on operations and kinds.
const (
	extAction = "x-kubernetes-action"
	extGVK    = "x-kubernetes-group-version-kind"
)

var (
	produces      = []string{"application/json", "application/yaml"}
	producesWatch = []string{"application/json", "application/yaml", "application/json;stream=watch"}
	consumesAny   = []string{"*/*"}
)

// Query parameters, as kube-apiserver documents them.
var (
	paramAllowWatchBookmarks  = queryParam("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.")
	paramContinue             = queryParam("continue", "string", "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize.")
	paramDryRun               = queryParam("dryRun", "string", "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed")
	paramFieldManager         = queryParam("fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.")
	paramFieldSelector        = queryParam("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything.")
	paramFieldValidation      = queryParam("fieldValidation", "string", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present.")
	paramForce                = queryParam("force", "boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.")
	paramGracePeriodSeconds   = queryParam("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.")
	paramIgnoreStoreRead      = queryParam("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.")
	paramLabelSelector        = queryParam("labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything.")
	paramLimit                = queryParam("limit", "integer", "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results.")
	paramOrphanDependents     = queryParam("orphanDependents", "boolean", "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.")
	paramPretty               = queryParam("pretty", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).")
	paramPropagationPolicy    = queryParam("propagationPolicy", "string", "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.")
	paramResourceVersion      = queryParam("resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset")
	paramResourceVersionMatch = queryParam("resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset")
	paramSendInitialEvents    = queryParam("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event will be sent.")
	paramTimeoutSeconds       = queryParam("timeoutSeconds", "integer", "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.")
	paramWatch                = queryParam("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.")
)

// listParams are the parameters of list and watch calls.
var listParams = []spec.Parameter{paramAllowWatchBookmarks, paramContinue, paramFieldSelector, paramLabelSelector, paramLimit, paramResourceVersion, paramResourceVersionMatch, paramSendInitialEvents, paramTimeoutSeconds, paramWatch}

func queryParam(name, typ, description string) spec.Parameter {
	return spec.Parameter{
		CommonValidations: spec.CommonValidations{UniqueItems: true},
		SimpleSchema:      spec.SimpleSchema{Type: typ},
		ParamProps:        spec.ParamProps{Name: name, In: "query", Description: description},
	}
}

func pathParam(name, description string) spec.Parameter {
	return spec.Parameter{
		CommonValidations: spec.CommonValidations{UniqueItems: true},
		SimpleSchema:      spec.SimpleSchema{Type: "string"},
		ParamProps:        spec.ParamProps{Name: name, In: "path", Description: description, Required: true},
	}
}

func bodyParam(def string, required bool) spec.Parameter {
	return spec.Parameter{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: required, Schema: refSchema(def)}}
}

func refSchema(def string) *spec.Schema {
	return spec.RefSchema("#/definitions/" + def)
}

// kindNames are the definitions of one resource's kind and list.
type kindNames struct {
	object, list string
}

// resourcePaths adds the paths of every verb r serves to paths, as
// kube-apiserver's installer lays them out.
func resourcePaths(paths map[string]spec.PathItem, r *resource.Resource, names kindNames) {
	gvr := r.GroupVersionResource
	root := "/apis/" + gvr.Group + "/" + gvr.Version
	group := strings.TrimSuffix(gvr.Group, ".k8s.io")
	if gvr.Group == "" {
		root = "/api/" + gvr.Version
		group = "core"
	}
	o := &operations{
		prefix:  toOperationID(group, true) + toOperationID(gvr.Version, true),
		tag:     toOperationID(group, false) + "_" + toOperationID(gvr.Version, false),
		gvk:     map[string]any{"group": gvr.Group, "version": gvr.Version, "kind": r.Kind},
		kind:    r.Kind,
		names:   names,
		verbs:   map[string]bool{},
		consume: patchTypes(r),
	}
	for _, v := range r.VerbList() {
		o.verbs[v] = true
	}

	scoped, nsKind := "", r.Kind
	var nsParams []spec.Parameter
	if r.Namespaced {
		scoped = "/namespaces/{namespace}"
		nsKind = "Namespaced" + r.Kind
		nsParams = []spec.Parameter{pathParam("namespace", "object name and auth scope, such as for teams and projects")}
	}
	nameParams := []spec.Parameter{pathParam("name", "name of the "+r.Kind)}
	pretty := []spec.Parameter{paramPretty}
	collection := root + scoped + "/" + gvr.Resource
	item := collection + "/{name}"

	add(paths, collection, join(nsParams, pretty), pathOps{
		get:    o.list("list"+o.prefix+nsKind, "list or watch objects of kind "+r.Kind),
		post:   o.create("create"+o.prefix+nsKind, "create "+article(r.Kind)+" "+r.Kind),
		delete: o.deleteCollection("delete"+o.prefix+"Collection"+nsKind, "delete collection of "+r.Kind),
	})
	add(paths, item, join(nameParams, nsParams, pretty), pathOps{
		get:    o.read("get", "read"+o.prefix+nsKind, "read the specified "+r.Kind),
		put:    o.replace("update", "replace"+o.prefix+nsKind, "replace the specified "+r.Kind),
		patch:  o.patch("patch", "patch"+o.prefix+nsKind, "partially update the specified "+r.Kind),
		delete: o.delete("delete"+o.prefix+nsKind, "delete "+article(r.Kind)+" "+r.Kind),
	})
	if r.Subresources.Status {
		status := &operations{prefix: o.prefix, tag: o.tag, gvk: o.gvk, kind: o.kind, names: o.names, consume: o.consume,
			verbs: map[string]bool{"get": true, "update": true, "patch": true}}
		add(paths, item+"/status", join(nameParams, nsParams, pretty), pathOps{
			get:   status.read("get", "read"+o.prefix+nsKind+"Status", "read status of the specified "+r.Kind),
			put:   status.replace("update", "replace"+o.prefix+nsKind+"Status", "replace status of the specified "+r.Kind),
			patch: status.patch("patch", "patch"+o.prefix+nsKind+"Status", "partially update status of the specified "+r.Kind),
		})
	}
	if r.Subresources.Scale != nil {
		// Kube's paths for a custom resource's scale carry the resource's
		// group, version and kind, and the Scale as their body.
		scale := &operations{prefix: o.prefix, tag: o.tag, gvk: o.gvk, kind: o.kind, names: kindNames{object: defScale}, consume: o.consume,
			verbs: map[string]bool{"get": true, "update": true, "patch": true}}
		add(paths, item+"/scale", join(nameParams, nsParams, pretty), pathOps{
			get:   scale.read("get", "read"+o.prefix+nsKind+"Scale", "read scale of the specified "+r.Kind),
			put:   scale.replace("update", "replace"+o.prefix+nsKind+"Scale", "replace scale of the specified "+r.Kind),
			patch: scale.patch("patch", "patch"+o.prefix+nsKind+"Scale", "partially update scale of the specified "+r.Kind),
		})
	}
	for _, a := range r.Subresources.Actions {
		if a.Schema == nil {
			continue
		}
		act := &operations{prefix: o.prefix, tag: o.tag, kind: a.Kind.Kind, names: kindNames{object: a.Schema.Ref},
			gvk:   map[string]any{"group": a.Kind.Group, "version": a.Kind.Version, "kind": a.Kind.Kind},
			verbs: map[string]bool{"create": true}}
		add(paths, item+"/"+a.Name, join(nameParams, nsParams, pretty), pathOps{
			post: act.create("create"+o.prefix+nsKind+toOperationID(a.Name, true), "create "+a.Name+" of "+article(r.Kind)+" "+r.Kind),
		})
	}
	if r.Namespaced {
		add(paths, root+"/"+gvr.Resource, join(pretty, listParams), pathOps{
			get: o.listAll("list"+o.prefix+r.Kind+"ForAllNamespaces", "list or watch objects of kind "+r.Kind),
		})
	}
	watchRoot := root + "/watch" + scoped + "/" + gvr.Resource
	add(paths, watchRoot, join(nsParams, pretty, listParams), pathOps{
		get: o.watch("watchlist", "watch"+o.prefix+nsKind+"List", "watch individual changes to a list of "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead."),
	})
	add(paths, watchRoot+"/{name}", join(nameParams, nsParams, pretty, listParams), pathOps{
		get: o.watch("watch", "watch"+o.prefix+nsKind, "watch changes to an object of kind "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."),
	})
	if r.Namespaced {
		add(paths, root+"/watch/"+gvr.Resource, join(pretty, listParams), pathOps{
			get: o.watch("watchlist", "watch"+o.prefix+r.Kind+"ListForAllNamespaces", "watch individual changes to a list of "+r.Kind+". deprecated: use the 'watch' parameter with a list operation instead."),
		})
	}
}

// patchTypes are the patch media types a resource accepts: strategic
// merge patch needs Go struct tags, so unstructured objects go without.
func patchTypes(r *resource.Resource) []string {
	types := []string{"application/json-patch+json", "application/merge-patch+json"}
	if r.Objects != nil {
		if _, ok := r.Objects.New().(runtime.Unstructured); !ok {
			types = append(types, "application/strategic-merge-patch+json")
		}
	}
	return append(types, "application/apply-patch+yaml")
}

// join concatenates parameter lists into a new slice, so that paths never
// share a backing array.
func join(lists ...[]spec.Parameter) []spec.Parameter {
	var out []spec.Parameter
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

type pathOps struct {
	get, put, post, delete, patch *spec.Operation
}

// add sets a path whose resource serves at least one of its operations.
func add(paths map[string]spec.PathItem, path string, params []spec.Parameter, ops pathOps) {
	if ops.get == nil && ops.put == nil && ops.post == nil && ops.delete == nil && ops.patch == nil {
		return
	}
	item := spec.PathItem{}
	item.Get, item.Put, item.Post, item.Delete, item.Patch = ops.get, ops.put, ops.post, ops.delete, ops.patch
	item.Parameters = params
	paths[path] = item
}

// operations makes the operations of one resource, nil for verbs it does
// not serve.
type operations struct {
	prefix, tag string
	gvk         map[string]any
	kind        string
	names       kindNames
	verbs       map[string]bool
	consume     []string
}

func (o *operations) op(verb, action, id, description string, produce []string, params []spec.Parameter, responses map[int]string) *spec.Operation {
	if !o.verbs[verb] {
		return nil
	}
	op := &spec.Operation{OperationProps: spec.OperationProps{
		ID:          id,
		Description: description,
		Tags:        []string{o.tag},
		Consumes:    consumesAny,
		Produces:    produce,
		Schemes:     []string{"https"},
		Parameters:  params,
		Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
			401: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}},
		}}},
	}}
	for code, def := range responses {
		op.Responses.StatusCodeResponses[code] = spec.Response{ResponseProps: spec.ResponseProps{
			Description: responseDescription(code),
			Schema:      refSchema(def),
		}}
	}
	op.AddExtension(extAction, action)
	op.AddExtension(extGVK, o.gvk)
	return op
}

func responseDescription(code int) string {
	switch code {
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	}
	return "OK"
}

func (o *operations) list(id, description string) *spec.Operation {
	return o.op("list", "list", id, description, producesWatch, listParams, map[int]string{200: o.names.list})
}

// listAll is the list across namespaces, whose parameters are the path's.
func (o *operations) listAll(id, description string) *spec.Operation {
	return o.op("list", "list", id, description, producesWatch, nil, map[int]string{200: o.names.list})
}

func (o *operations) create(id, description string) *spec.Operation {
	return o.op("create", "post", id, description, produces,
		[]spec.Parameter{bodyParam(o.names.object, true), paramDryRun, paramFieldManager, paramFieldValidation},
		map[int]string{200: o.names.object, 201: o.names.object, 202: o.names.object})
}

func (o *operations) deleteCollection(id, description string) *spec.Operation {
	return o.op("deletecollection", "deletecollection", id, description, produces,
		[]spec.Parameter{bodyParam(defDeleteOptions, false), paramContinue, paramDryRun, paramFieldSelector, paramGracePeriodSeconds,
			paramIgnoreStoreRead, paramLabelSelector, paramLimit, paramOrphanDependents, paramPropagationPolicy,
			paramResourceVersion, paramResourceVersionMatch, paramSendInitialEvents, paramTimeoutSeconds},
		map[int]string{200: defStatus})
}

func (o *operations) read(verb, id, description string) *spec.Operation {
	return o.op(verb, "get", id, description, produces, nil, map[int]string{200: o.names.object})
}

func (o *operations) replace(verb, id, description string) *spec.Operation {
	return o.op(verb, "put", id, description, produces,
		[]spec.Parameter{bodyParam(o.names.object, true), paramDryRun, paramFieldManager, paramFieldValidation},
		map[int]string{200: o.names.object, 201: o.names.object})
}

func (o *operations) patch(verb, id, description string) *spec.Operation {
	op := o.op(verb, "patch", id, description, produces,
		[]spec.Parameter{bodyParam(defPatch, true), paramDryRun, paramFieldManager, paramFieldValidation, paramForce},
		map[int]string{200: o.names.object, 201: o.names.object})
	if op != nil {
		op.Consumes = o.consume
	}
	return op
}

func (o *operations) delete(id, description string) *spec.Operation {
	return o.op("delete", "delete", id, description, produces,
		[]spec.Parameter{bodyParam(defDeleteOptions, false), paramDryRun, paramGracePeriodSeconds, paramIgnoreStoreRead, paramOrphanDependents, paramPropagationPolicy},
		map[int]string{200: defStatus, 202: defStatus})
}

func (o *operations) watch(action, id, description string) *spec.Operation {
	return o.op("watch", action, id, description, producesWatch, nil, map[int]string{200: defWatchEvent})
}

// toOperationID is kube-apiserver's ToValidOperationID: punctuation is
// dropped and the letter after it capitalized.
func toOperationID(s string, capitalizeFirst bool) string {
	var b bytes.Buffer
	capitalize := capitalizeFirst
	for i, r := range s {
		switch {
		case unicode.IsLetter(r) || r == '_' || (i != 0 && unicode.IsDigit(r)):
			if capitalize {
				b.WriteRune(unicode.ToUpper(r))
				capitalize = false
			} else {
				b.WriteRune(r)
			}
		default:
			capitalize = true
		}
	}
	return b.String()
}

func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an"
	}
	return "a"
}
