package authn

import (
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
)

// Groups kube gives every authenticated user, and the one it admits to
// everything.
const (
	AllAuthenticated = "system:authenticated"
	SystemMasters    = "system:masters"
)

// Tokens maps static bearer tokens to their users.
type Tokens map[string]frontproxy.User

// LoadTokenFile reads kube's static token file: CSV lines of
// token,user,uid[,"group1,group2"].
func LoadTokenFile(path string) (Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer func() { _ = f.Close() }()
	return ParseTokens(f)
}

// ParseTokens reads the token file format from r.
func ParseTokens(r io.Reader) (Tokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	tokens := Tokens{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return tokens, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read token file: %w", err)
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("token file line %d: want token,user,uid[,groups], got %d fields", line, len(rec))
		}
		if rec[0] == "" {
			return nil, fmt.Errorf("token file line %d: empty token", line)
		}
		if _, dup := tokens[rec[0]]; dup {
			return nil, fmt.Errorf("token file line %d: duplicate token", line)
		}
		u := frontproxy.User{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					u.Groups = append(u.Groups, g)
				}
			}
		}
		tokens[rec[0]] = u
	}
}

// Authenticator finds who sent a request.
type Authenticator struct {
	tokens Tokens
}

// New returns an authenticator of client certificates (verified by the
// TLS handshake against the client CA) and of tokens.
func New(tokens Tokens) *Authenticator {
	return &Authenticator{tokens: tokens}
}

// Authenticate returns the user of r, or false when r carries no valid
// credential. A certificate wins over a token, as kube tries x509 first.
func (a *Authenticator) Authenticate(r *http.Request) (*frontproxy.User, bool) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		c := r.TLS.VerifiedChains[0][0]
		if c.Subject.CommonName != "" {
			return authenticated(frontproxy.User{Name: c.Subject.CommonName, Groups: slices.Clone(c.Subject.Organization)}), true
		}
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return nil, false
	}
	for t, u := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			return authenticated(u), true
		}
	}
	return nil, false
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticated adds system:authenticated, as kube does for every user
// an authenticator names.
func authenticated(u frontproxy.User) *frontproxy.User {
	u.Groups = slices.Clone(u.Groups)
	if !slices.Contains(u.Groups, AllAuthenticated) {
		u.Groups = append(u.Groups, AllAuthenticated)
	}
	return &u
}

// Unauthorized is kube's answer to a request without valid credentials.
func Unauthorized() error {
	return apierrors.NewUnauthorized("Unauthorized")
}

// Authorize admits members of system:masters and refuses everyone else
// with kube's Forbidden error for the request info.
func Authorize(u *frontproxy.User, info *requestinfo.Info) error {
	if slices.Contains(u.Groups, SystemMasters) {
		return nil
	}
	return Forbidden(u.Name, info)
}

// Forbidden is kube-apiserver's 403 for user's request.
func Forbidden(user string, info *requestinfo.Info) error {
	gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
	return apierrors.NewForbidden(gr, info.Name, errors.New(forbiddenMessage(user, info)))
}

// forbiddenMessage says what user may not do, worded as kube's
// authorization filter words it.
func forbiddenMessage(user string, info *requestinfo.Info) string {
	if !info.IsResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", user, info.Verb, info.Path)
	}
	resource := info.Resource
	if info.Subresource != "" {
		resource += "/" + info.Subresource
	}
	if info.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", user, info.Verb, resource, info.APIGroup, info.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", user, info.Verb, resource, info.APIGroup)
}
