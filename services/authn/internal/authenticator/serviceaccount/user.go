package serviceaccount

import (
	"errors"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	"kplane.dev/services/authn/internal/authenticator"
)

// Prefixes and keys of service account users, as kube-apiserver names them.
const (
	UsernamePrefix    = "system:serviceaccount:"
	AllGroup          = "system:serviceaccounts"
	GroupPrefix       = "system:serviceaccounts:"
	PodNameKey        = "authentication.kubernetes.io/pod-name"
	PodUIDKey         = "authentication.kubernetes.io/pod-uid"
	NodeNameKey       = "authentication.kubernetes.io/node-name"
	NodeUIDKey        = "authentication.kubernetes.io/node-uid"
	CredentialIDKey   = "authentication.kubernetes.io/credential-id"
	credentialIDOfJTI = "JTI="
)

var errInvalidUsername = errors.New("Username must be in the form system:serviceaccount:namespace:name") //nolint:staticcheck // kube's text

// MakeUsername is the user name of a service account.
func MakeUsername(namespace, name string) string {
	return UsernamePrefix + namespace + ":" + name
}

// SplitUsername returns the namespace and name of a service account user
// name, which must name a valid namespace and service account.
func SplitUsername(username string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(username, UsernamePrefix)
	if !ok {
		return "", "", errInvalidUsername
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 2 {
		return "", "", errInvalidUsername
	}
	namespace, name = parts[0], parts[1]
	if len(apivalidation.ValidateNamespaceName(namespace, false)) != 0 ||
		len(apivalidation.ValidateServiceAccountName(name, false)) != 0 {
		return "", "", errInvalidUsername
	}
	return namespace, name, nil
}

// info is what a validated token says about its service account.
type info struct {
	namespace, name, uid string
	podName, podUID      string
	nodeName, nodeUID    string
	credentialID         string
}

func (i *info) user() authenticator.UserInfo {
	u := authenticator.UserInfo{
		Name:   MakeUsername(i.namespace, i.name),
		UID:    i.uid,
		Groups: []string{AllGroup, GroupPrefix + i.namespace},
	}
	extra := map[string][]string{}
	if i.podName != "" && i.podUID != "" {
		extra[PodNameKey] = []string{i.podName}
		extra[PodUIDKey] = []string{i.podUID}
	}
	if i.credentialID != "" {
		extra[CredentialIDKey] = []string{i.credentialID}
	}
	if i.nodeName != "" {
		extra[NodeNameKey] = []string{i.nodeName}
		if i.nodeUID != "" {
			extra[NodeUIDKey] = []string{i.nodeUID}
		}
	}
	if len(extra) > 0 {
		u.Extra = extra
	}
	return u
}
