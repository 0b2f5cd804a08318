package bootstrap

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"kplane.dev/services/authn/internal/authenticator"
)

// Names and keys of bootstrap token Secrets (k8s.io/cluster-bootstrap).
const (
	Namespace        = "kube-system"
	SecretPrefix     = "bootstrap-token-"
	SecretType       = corev1.SecretType("bootstrap.kubernetes.io/token")
	TokenIDKey       = "token-id"
	TokenSecretKey   = "token-secret"
	ExpirationKey    = "expiration"
	UsageAuthKey     = "usage-bootstrap-authentication"
	ExtraGroupsKey   = "auth-extra-groups"
	UserPrefix       = "system:bootstrap:"
	DefaultGroup     = "system:bootstrappers"
	GroupPattern     = `\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`
	tokenPattern     = `\A([a-z0-9]{6})\.([a-z0-9]{16})\z`
	expirationLayout = time.RFC3339
)

var (
	tokenRE = regexp.MustCompile(tokenPattern)
	groupRE = regexp.MustCompile(GroupPattern)
)

// SecretGetter looks up a Secret; a missing one is a NotFound API error.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// Authenticator authenticates bootstrap tokens.
type Authenticator struct {
	secrets SecretGetter
	clock   clock.PassiveClock
	log     *slog.Logger
}

var _ authenticator.Authenticator = (*Authenticator)(nil)

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithClock sets the clock expiration is checked against.
func WithClock(c clock.PassiveClock) Option { return func(a *Authenticator) { a.clock = c } }

// WithLogger sets where the reasons a matching Secret refused a token are
// logged, at debug level. Logs name the Secret, never the token.
func WithLogger(l *slog.Logger) Option { return func(a *Authenticator) { a.log = l } }

// New returns an Authenticator that finds Secrets with secrets.
func New(secrets SecretGetter, opts ...Option) *Authenticator {
	a := &Authenticator{secrets: secrets, clock: clock.RealClock{}, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(a)
	}
	return a
}

// AuthenticateToken implements authenticator.Authenticator. As in kube, a
// token that is not of the bootstrap form, or whose Secret is missing or
// refuses it, is no opinion, so that other authenticators may accept it;
// only a failed lookup is an error.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	m := tokenRE.FindStringSubmatch(token)
	if m == nil {
		return nil, false, nil
	}
	id, tokenSecret := m[1], m[2]
	name := SecretPrefix + id
	s, err := a.secrets.GetSecret(ctx, Namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			a.log.Debug("no secret to match bootstrap token", "secret", name)
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("get bootstrap token secret %s/%s: %w", Namespace, name, err)
	}
	refuse := func(reason string) (*authenticator.Response, bool, error) {
		a.log.Debug("bootstrap secret matching bearer token refused it", "secret", Namespace+"/"+name, "reason", reason)
		return nil, false, nil
	}
	if s.DeletionTimestamp != nil {
		return refuse("is deleted and awaiting removal")
	}
	if s.Type != SecretType || s.Data == nil {
		return refuse("has invalid type, expected " + string(SecretType))
	}
	if subtle.ConstantTimeCompare(s.Data[TokenSecretKey], []byte(tokenSecret)) != 1 {
		return refuse("has invalid value for key " + TokenSecretKey)
	}
	if string(s.Data[TokenIDKey]) != id {
		return refuse("has invalid value for key " + TokenIDKey)
	}
	if expired(s, a.clock.Now()) {
		return refuse("has expired")
	}
	if string(s.Data[UsageAuthKey]) != "true" {
		return refuse("not marked " + UsageAuthKey + "=true")
	}
	groups, err := Groups(s)
	if err != nil {
		return refuse(fmt.Sprintf("has invalid value for key %s: %v", ExtraGroupsKey, err))
	}
	return &authenticator.Response{User: authenticator.UserInfo{Name: UserPrefix + id, Groups: groups}}, true, nil
}

// expired reports whether the Secret's expiration has passed; an
// unparseable expiration counts as expired.
func expired(s *corev1.Secret, now time.Time) bool {
	v := string(s.Data[ExpirationKey])
	if v == "" {
		return false
	}
	t, err := time.Parse(expirationLayout, v)
	if err != nil {
		return true
	}
	return !t.After(now)
}

// Groups returns the groups of a bootstrap token Secret: system:bootstrappers
// and the groups in auth-extra-groups, deduplicated and sorted. Every extra
// group must match GroupPattern.
func Groups(s *corev1.Secret) ([]string, error) {
	groups := []string{DefaultGroup}
	extra := string(s.Data[ExtraGroupsKey])
	if extra == "" {
		return groups, nil
	}
	for _, g := range strings.Split(extra, ",") {
		if !groupRE.MatchString(g) {
			return nil, fmt.Errorf("bootstrap group %q is invalid (must match %s)", g, GroupPattern)
		}
		groups = append(groups, g)
	}
	slices.Sort(groups)
	return slices.Compact(groups), nil
}
