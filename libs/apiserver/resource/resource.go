package resource

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/storage"
)

// Resource declares one served resource of one group-version.
type Resource struct {
	// Group, Version and Resource (the lowercase plural) name it in URLs.
	GroupVersionResource schema.GroupVersionResource
	// Kind and ListKind name its objects; ListKind defaults to Kind+"List".
	Kind     string
	ListKind string
	// Singular is the lowercase singular name (kubectl get configmap).
	Singular   string
	Namespaced bool
	ShortNames []string
	Categories []string
	// Verbs defaults to every verb: create, delete, deletecollection, get,
	// list, patch, update, watch.
	Verbs []string
	// Subresources the resource serves besides the main one.
	Subresources Subresources
	// Generation keeps metadata.generation: 1 on create, one more on every
	// change outside metadata and status, as for custom resources and the
	// built-in kinds with a spec. Kinds without it (ConfigMaps, Secrets)
	// carry no generation, as kube-apiserver serves them.
	Generation bool
	// Columns are the table columns after NAME (which every table has),
	// as `kubectl get` shows them; nil gives kube's default of AGE alone.
	Columns []Column
	// ColumnsIncludeName says Columns are every column of the table, NAME
	// among them where the kind puts it (kube's events table shows it
	// last, and only in wide output); otherwise NAME comes first.
	ColumnsIncludeName bool
	// Schema is the kind's OpenAPI schema; nil means a schema that accepts
	// any object (x-kubernetes-preserve-unknown-fields).
	Schema *Schema
	// Objects makes, encodes and decodes the resource's objects.
	Objects Objects
	// Strategy defaults, canonicalizes and validates objects; nil means
	// metadata rules only.
	Strategy Strategy
	// Attrs returns the labels and selectable fields of an object; nil
	// means storage.DefaultAttrs (metadata.name, metadata.namespace).
	Attrs storage.AttrFunc
	// Warnings are sent with every response for the resource, as kube
	// sends a deprecated custom resource version's deprecation warning.
	Warnings []string

	// StorageVersion is the version objects are stored in, whose kind
	// discovery's storageVersionHash names; empty means the resource's
	// own. A custom resource's served versions share their CRD's storage
	// version.
	StorageVersion string

	// Equivalents are the other group-versions this resource's stored
	// objects are served as, kube's equivalent resources: a custom
	// resource's other served versions, events in core/v1 and in
	// events.k8s.io/v1. Admission webhooks and policies with matchPolicy
	// Equivalent match a write through any of them.
	Equivalents []Equivalent
	// Definition is, for a custom resource with Equivalents, its CRD cut
	// to what converting between its versions takes: admission converts
	// a write with it for what matches an equivalent version.
	Definition *apiextensionsv1.CustomResourceDefinition

	// StoreGeneration names what the resource's store depends on besides
	// its group, version and resource, such as a custom resource's
	// schema: a server replacing the resource keeps its store (and watch
	// cache) only while StoreGeneration stays the same, and otherwise reads
	// the objects anew through a new store.
	StoreGeneration string

	// Unlisted leaves the resource out of its group-version's resource
	// list (/apis/<group>/<version>) while the aggregated discovery
	// document lists it: a custom resource whose CRD's names are accepted
	// but which is not established yet. kube lists a CRD's resources only
	// once it is established, and clients that wait for a new CRD poll
	// that list; crd establishes a CRD only once the gateway's aggregated
	// document, which kubectl reads, lists it, so that one lists it first.
	Unlisted bool

	// Creater, when set, makes the resource one that is not stored, as
	// kube's reviews: it answers every create and nothing else is served
	// (Verbs must be just create). The server builds no store for it.
	Creater Creater
}

// Equivalent is a resource, and the kind of its objects, that serves
// another resource's stored objects.
type Equivalent struct {
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
}

// Creater answers the creates of a resource or subresource that is not
// stored, such as TokenReview or serviceaccounts/token: it gets the
// decoded object and returns what the client receives, with 201 Created.
type Creater interface {
	Create(ctx context.Context, req *CreateRequest) (runtime.Object, error)
}

// CreateRequest is one create a Creater answers.
type CreateRequest struct {
	// Namespace is the request's namespace; Name, for a subresource, is
	// the name of the object it belongs to.
	Namespace, Name string
	// Object is the decoded body, its namespace defaulted to Namespace.
	Object runtime.Object
	DryRun bool
}

// Stored reports whether the resource's objects live in storage.
func (r *Resource) Stored() bool { return r.Creater == nil }

// Subresources lists the subresources a resource serves.
type Subresources struct {
	// Status serves /status: updates through the main resource keep the
	// stored status, updates through /status change only status.
	Status bool
	// StatusWithMetadata lets a write through /status change the
	// object's metadata too (labels, annotations, finalizers, owners), as
	// kube's status strategies of its older kinds do (namespaces); the
	// newer kinds', and custom resources', keep everything but status.
	StatusWithMetadata bool
	// Finalize serves /finalize, as kube's namespaces: a PUT through it
	// changes only spec.finalizers, which updates through the main
	// resource and /status keep.
	Finalize bool
	// Scale serves /scale as kube-apiserver serves it for a custom
	// resource: an autoscaling/v1 Scale read from and written to the
	// object's fields at these paths. Only unstructured objects have it;
	// the built-in kinds with a scale have their own Go types.
	Scale *Scale
	// Actions are subresources that take creates of a kind of their own,
	// such as serviceaccounts/token taking TokenRequests.
	Actions []Action
}

// Scale declares the /scale subresource, as a CustomResourceDefinition's
// subresources.scale: paths are kube's simple JSON paths into the object
// (.spec.replicas), a leading dot and dot-separated field names.
type Scale struct {
	// SpecReplicasPath is the desired replica count, Scale's
	// spec.replicas; updates through /scale change only it. Required.
	SpecReplicasPath string
	// StatusReplicasPath is the observed replica count, Scale's
	// status.replicas (0 when absent). Required.
	StatusReplicasPath string
	// LabelSelectorPath, when set, is a string field holding the label
	// selector of the replicas in serialized form, Scale's
	// status.selector, which the horizontal pod autoscaler reads.
	LabelSelectorPath string
}

// Action is a create-only subresource answered by a Creater, as kube's
// serviceaccounts/token.
type Action struct {
	// Name is the subresource's name (token).
	Name string
	// Kind is what it takes and returns, with its group and version
	// (authentication.k8s.io/v1 TokenRequest).
	Kind schema.GroupVersionKind
	// Objects decodes the requests.
	Objects Objects
	// Schema is the kind's OpenAPI schema; nil leaves the action out of
	// the OpenAPI documents.
	Schema  *Schema
	Creater Creater
}

// Column is one table column: a kube TableColumnDefinition and the cell
// value for an object.
type Column struct {
	metav1.TableColumnDefinition
	// Cell computes the column's value for an object.
	Cell Cell
}

// Cell computes one table cell. A nil value prints as <none>.
type Cell interface {
	Value(obj runtime.Object) (any, error)
}

// Schema is a kind's OpenAPI schema in OpenAPI v2 form.
type Schema struct {
	// Ref is the REST-friendly definition name of the kind, such as
	// io.k8s.api.core.v1.ConfigMap.
	Ref string
	// Definitions holds Ref and every definition it refers to, with
	// references written "#/definitions/<name>" and the kind carrying its
	// x-kubernetes-group-version-kind extension. Resources of one API
	// package share one map.
	Definitions map[string]*spec.Schema
	// V2Definitions, when set, are published in the OpenAPI v2 document
	// instead of Definitions: a custom resource's v2 form drops what
	// kubectl's v2 reader cannot handle, while v3 and server-side apply
	// keep the full schema.
	V2Definitions map[string]*spec.Schema
	// OtherVersions names the definitions, in Definitions, of the kind in
	// its other versions: managedFields entries recorded through another
	// version are read with them.
	OtherVersions []string
}

// VersionConverter is implemented by the Objects of a kind with several
// versions that converts between them (a custom resource's conversion),
// as managedFields entries recorded through another version need.
type VersionConverter interface {
	// ConvertToVersion returns obj in version gv of its group and kind.
	ConvertToVersion(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error)
}

// Objects knows a resource's Go representation: a typed k8s.io/api struct
// or *unstructured.Unstructured. Both go through the same code paths.
type Objects interface {
	storage.Codec
	// New returns an empty object of the kind, its apiVersion and kind set.
	New() runtime.Object
	// NewList returns an empty list of the kind, its apiVersion and kind set.
	NewList() runtime.Object
	// DecodeRequest decodes a request body into a new object. Its
	// apiVersion and kind are whatever the body says (checking them is the
	// caller's), defaulting to the resource's when absent.
	DecodeRequest(data []byte, opts DecodeOptions) (runtime.Object, error)
	// MediaTypes are the request body formats DecodeRequest reads, in the
	// order kube-apiserver's 415 lists them.
	MediaTypes() []string
}

// DecodeOptions says how to read a request body.
type DecodeOptions struct {
	// YAML reads the body as YAML (application/yaml); otherwise JSON.
	YAML bool
	// Protobuf reads the body as Kubernetes protobuf
	// (application/vnd.kubernetes.protobuf), which client-go's typed
	// clients send for built-in kinds. Only kinds whose MediaTypes list it
	// can be read so.
	Protobuf bool
	// Strict reports unknown and duplicate fields in the strict decoding
	// error kube-apiserver reports (runtime.IsStrictDecodingError) along
	// with the decoded object; otherwise they are dropped silently.
	Strict bool
}

// Strategy applies a resource's own rules on create and update. The REST
// layer handles metadata (names, uid, timestamps, generation, managed
// fields, status subresource semantics) for every kind before calling it.
type Strategy interface {
	// PrepareForCreate defaults a new object.
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// Validate checks a new object.
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	// PrepareForUpdate defaults obj, the new state of old.
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	// ValidateUpdate checks the change from old to obj.
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// GroupResource returns the resource's group and plural name, as errors
// name it ("configmaps", "widgets.example.com").
func (r *Resource) GroupResource() schema.GroupResource {
	return r.GroupVersionResource.GroupResource()
}

// GroupVersionKind returns the kind with its group and version.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersionResource.GroupVersion().WithKind(r.Kind)
}

// ListKindName returns ListKind or its default.
func (r *Resource) ListKindName() string {
	if r.ListKind != "" {
		return r.ListKind
	}
	return r.Kind + "List"
}

// AllVerbs are the verbs of a resource that declares none.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// VerbList returns Verbs or its default.
func (r *Resource) VerbList() []string {
	if len(r.Verbs) != 0 {
		return r.Verbs
	}
	return AllVerbs
}

// AttrFunc returns Attrs or its default.
func (r *Resource) AttrFunc() storage.AttrFunc {
	if r.Attrs != nil {
		return r.Attrs
	}
	return storage.DefaultAttrs
}

// CellFunc adapts a function to Cell, for columns computed in Go such as
// a ConfigMap's DATA count.
type CellFunc func(obj runtime.Object) (any, error)

// Value returns f(obj).
func (f CellFunc) Value(obj runtime.Object) (any, error) { return f(obj) }
