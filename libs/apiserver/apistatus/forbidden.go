package apistatus

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Refused is what a refused request asked for, in the terms of kube's 403.
type Refused struct {
	User string
	Verb string
	// Group, Resource, Subresource, Namespace and Name describe a resource
	// request; Path a non-resource one (Resource empty).
	Group, Resource, Subresource, Namespace, Name string
	Path                                          string
}

// Forbidden is kube-apiserver's 403 for r, worded as its responsewriters
// word it (kubectl shows the message as it is), with the authorizer's
// reason appended when it gave one.
func Forbidden(r Refused, reason string) error {
	msg := sanitizer.Replace(forbiddenMessage(r))
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: r.Group, Resource: r.Resource}, r.Name, errors.New(msg))
}

// sanitizer escapes what could make a message read as HTML, as kube's
// responsewriters do.
var sanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

func forbiddenMessage(r Refused) string {
	if r.Resource == "" {
		return fmt.Sprintf("User %q cannot %s path %q", r.User, r.Verb, r.Path)
	}
	resource := r.Resource
	if r.Subresource != "" {
		resource += "/" + r.Subresource
	}
	if r.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", r.User, r.Verb, resource, r.Group, r.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", r.User, r.Verb, resource, r.Group)
}
