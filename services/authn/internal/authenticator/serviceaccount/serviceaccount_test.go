package serviceaccount_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
)

const (
	issuer = "https://kplane.test"
	apiAud = "https://kplane.test"
)

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func rsaKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signer(t testing.TB, iss string, key crypto.Signer) *serviceaccount.Signer {
	t.Helper()
	s, err := serviceaccount.NewSigner(iss, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keys(t testing.TB, pubs ...crypto.PublicKey) *serviceaccount.StaticKeys {
	t.Helper()
	k, err := serviceaccount.NewStaticKeys(pubs...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func meta(ns, name, uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
}

var (
	sa     = &corev1.ServiceAccount{ObjectMeta: meta("default", "build", "sa-uid")}
	pod    = &corev1.Pod{ObjectMeta: meta("default", "web", "pod-uid")}
	secret = &corev1.Secret{ObjectMeta: meta("default", "build-token", "secret-uid")}
	node   = &corev1.Node{ObjectMeta: meta("", "n1", "node-uid")}
)

func deletedAt(at time.Time) metav1.ObjectMeta {
	m := meta("default", "dying", "dying-uid")
	ts := metav1.NewTime(at)
	m.DeletionTimestamp = &ts
	return m
}

func boundClaims(t testing.TB, s *corev1.ServiceAccount, b serviceaccount.Binding, auds []string, exp time.Duration) *serviceaccount.Claims {
	t.Helper()
	c, err := serviceaccount.BoundClaims(start, s, b, auds, exp, "jti-1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sign(t testing.TB, s *serviceaccount.Signer, c *serviceaccount.Claims) string {
	t.Helper()
	tok, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestBoundTokens(t *testing.T) {
	key, rsaK := ecKey(t), rsaKey(t)
	es, rs := signer(t, issuer, key), signer(t, issuer, rsaK)
	other := signer(t, "https://elsewhere.test", key)
	stranger := signer(t, issuer, ecKey(t))

	objs := newObjects()
	objs.add(sa, pod, secret, node,
		&corev1.ServiceAccount{ObjectMeta: deletedAt(start.Add(-2 * time.Minute))},
		&corev1.Pod{ObjectMeta: func() metav1.ObjectMeta { m := deletedAt(start.Add(-30 * time.Second)); m.Name = "leaving"; return m }()},
	)
	dyingSA := &corev1.ServiceAccount{ObjectMeta: meta("default", "dying", "dying-uid")}
	staleSA := &corev1.ServiceAccount{ObjectMeta: meta("default", "build", "old-sa-uid")}
	gone := &corev1.ServiceAccount{ObjectMeta: meta("default", "gone", "gone-uid")}
	stalePod := &corev1.Pod{ObjectMeta: meta("default", "web", "old-pod-uid")}
	leavingPod := &corev1.Pod{ObjectMeta: meta("default", "leaving", "dying-uid")}
	missingPod := &corev1.Pod{ObjectMeta: meta("default", "missing", "x")}
	staleSecret := &corev1.Secret{ObjectMeta: meta("default", "build-token", "old-secret-uid")}
	staleNode := &corev1.Node{ObjectMeta: meta("", "n1", "old-node-uid")}

	api := []string{apiAud}
	hour := time.Hour
	baseUser := func(extra map[string][]string) authenticator.UserInfo {
		e := map[string][]string{serviceaccount.CredentialIDKey: {"JTI=jti-1"}}
		for k, v := range extra {
			e[k] = v
		}
		return authenticator.UserInfo{
			Name:   "system:serviceaccount:default:build",
			UID:    "sa-uid",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default"},
			Extra:  e,
		}
	}

	tests := []struct {
		name      string
		token     string
		requested authenticator.Audiences // nil: the caller names none
		now       time.Time
		want      *authenticator.UserInfo
		wantAuds  authenticator.Audiences
		wantErr   string // empty with want nil: no opinion
	}{
		{
			name:     "ES256",
			token:    sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			want:     ptr(baseUser(nil)),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:     "RS256",
			token:    sign(t, rs, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			want:     ptr(baseUser(nil)),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:  "bound to a pod on a node",
			token: sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Pod: pod, Node: node}, api, hour)),
			want: ptr(baseUser(map[string][]string{
				serviceaccount.PodNameKey: {"web"}, serviceaccount.PodUIDKey: {"pod-uid"},
				serviceaccount.NodeNameKey: {"n1"}, serviceaccount.NodeUIDKey: {"node-uid"},
			})),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:     "bound to a secret",
			token:    sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Secret: secret}, api, hour)),
			want:     ptr(baseUser(nil)),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:  "bound to a node",
			token: sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Node: node}, api, hour)),
			want: ptr(baseUser(map[string][]string{
				serviceaccount.NodeNameKey: {"n1"}, serviceaccount.NodeUIDKey: {"node-uid"},
			})),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:    "pod recreated under the same name",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Pod: stalePod}, api, hour)),
			wantErr: "pod UID (pod-uid) does not match service account pod ref claim (old-pod-uid)",
		},
		{
			name:    "bound pod gone",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Pod: missingPod}, api, hour)),
			wantErr: "service account token has been invalidated",
		},
		{
			name:     "bound pod deleted within the leeway",
			token:    sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Pod: leavingPod}, api, hour)),
			want:     ptr(baseUser(map[string][]string{serviceaccount.PodNameKey: {"leaving"}, serviceaccount.PodUIDKey: {"dying-uid"}})),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:    "secret recreated under the same name",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Secret: staleSecret}, api, hour)),
			wantErr: "secret UID (secret-uid) does not match service account secret ref claim (old-secret-uid)",
		},
		{
			name:    "node recreated under the same name",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{Node: staleNode}, api, hour)),
			wantErr: "node UID (node-uid) does not match service account node ref claim (old-node-uid)",
		},
		{
			name:    "service account recreated under the same name",
			token:   sign(t, es, boundClaims(t, staleSA, serviceaccount.Binding{}, api, hour)),
			wantErr: "service account UID (sa-uid) does not match claim (old-sa-uid)",
		},
		{
			name:    "service account gone",
			token:   sign(t, es, boundClaims(t, gone, serviceaccount.Binding{}, api, hour)),
			wantErr: `serviceaccounts "gone" not found`,
		},
		{
			name:    "service account deleted before the leeway",
			token:   sign(t, es, boundClaims(t, dyingSA, serviceaccount.Binding{}, api, hour)),
			wantErr: "service account default/dying has been deleted",
		},
		{
			name:     "expired within the leeway",
			token:    sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			now:      start.Add(hour + 59*time.Second),
			want:     ptr(baseUser(nil)),
			wantAuds: authenticator.Audiences{apiAud},
		},
		{
			name:    "expired",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			now:     start.Add(hour + 61*time.Second),
			wantErr: "service account token has expired",
		},
		{
			name:    "not valid yet",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			now:     start.Add(-2 * time.Minute),
			wantErr: "service account token is not valid yet",
		},
		{
			name: "issued in the future",
			token: sign(t, es, func() *serviceaccount.Claims {
				c := boundClaims(t, sa, serviceaccount.Binding{}, api, hour)
				c.NotBefore = nil
				return c
			}()),
			now:     start.Add(-2 * time.Minute),
			wantErr: "service account token is issued in the future",
		},
		{
			name:    "audience not the server's",
			token:   sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, []string{"vault"}, hour)),
			wantErr: `token audiences ["vault"] is invalid for the target audiences ["https://kplane.test"]`,
		},
		{
			name:      "requested audiences narrow the answer",
			token:     sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, []string{apiAud, "vault", "etcd"}, hour)),
			requested: authenticator.Audiences{"etcd", "vault", "other"},
			want:      ptr(baseUser(nil)),
			wantAuds:  authenticator.Audiences{"vault", "etcd"},
		},
		{
			name:      "requested audiences disjoint",
			token:     sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			requested: authenticator.Audiences{"vault"},
			wantErr:   `token audiences ["https://kplane.test"] is invalid for the target audiences ["vault"]`,
		},
		{
			name:    "signed by a key not in the set",
			token:   sign(t, stranger, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
			wantErr: "invalid signature, no keys found",
		},
		{
			name:    "signature tampered",
			token:   tamper(sign(t, es, boundClaims(t, sa, serviceaccount.Binding{}, api, hour))),
			wantErr: "go-jose/go-jose: error in cryptographic primitive",
		},
		{
			name:  "another issuer's token is no opinion",
			token: sign(t, other, boundClaims(t, sa, serviceaccount.Binding{}, api, hour)),
		},
		{name: "not a JWT", token: "abcdef.0123456789abcdef"},
		{name: "JSON", token: `{"iss":"https://kplane.test"}`},
		{name: "empty", token: ""},
	}
	clk := clocktesting.NewFakePassiveClock(start)
	a, err := serviceaccount.NewAuthenticator([]string{issuer}, keys(t, key.Public(), rsaK.Public()), authenticator.Audiences{apiAud}, objs, serviceaccount.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.now
			if now.IsZero() {
				now = start
			}
			clk.SetTime(now)
			ctx := context.Background()
			if tt.requested != nil {
				ctx = authenticator.WithAudiences(ctx, tt.requested)
			}
			check(t, a, ctx, tt.token, tt.want, tt.wantAuds, tt.wantErr)
		})
	}
}

func check(t *testing.T, a authenticator.Authenticator, ctx context.Context, token string, want *authenticator.UserInfo, wantAuds authenticator.Audiences, wantErr string) {
	t.Helper()
	resp, ok, err := a.AuthenticateToken(ctx, token)
	switch {
	case wantErr != "":
		if err == nil || err.Error() != wantErr || ok {
			t.Fatalf("got ok=%v err=%v, want error %q", ok, err, wantErr)
		}
	case want == nil:
		if ok || err != nil {
			t.Fatalf("got ok=%v err=%v, want no opinion", ok, err)
		}
	default:
		if !ok || err != nil {
			t.Fatalf("got ok=%v err=%v, want success", ok, err)
		}
		if diff := cmp.Diff(*want, resp.User); diff != "" {
			t.Errorf("user (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantAuds, resp.Audiences); diff != "" {
			t.Errorf("audiences (-want +got):\n%s", diff)
		}
	}
}

// tamper flips a bit of the signature.
func tamper(token string) string {
	i := strings.LastIndexByte(token, '.')
	sig, _ := base64.RawURLEncoding.DecodeString(token[i+1:])
	sig[0] ^= 1
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

func ptr[T any](v T) *T { return &v }

// A token signed by the old key verifies while the old public key is in the
// verification set, and stops verifying once it is removed; tokens of the new
// key verify throughout.
func TestKeyRotation(t *testing.T) {
	oldKey, newKey := ecKey(t), rsaKey(t)
	oldTok := sign(t, signer(t, issuer, oldKey), boundClaims(t, sa, serviceaccount.Binding{}, []string{apiAud}, time.Hour))
	newTok := sign(t, signer(t, issuer, newKey), boundClaims(t, sa, serviceaccount.Binding{}, []string{apiAud}, time.Hour))
	objs := newObjects()
	objs.add(sa)
	clk := clocktesting.NewFakePassiveClock(start)

	tests := []struct {
		name       string
		set        []crypto.PublicKey
		oldErr     string
		newErr     string
		stripKeyID bool
	}{
		{name: "old only", set: []crypto.PublicKey{oldKey.Public()}, newErr: "invalid signature, no keys found"},
		{name: "both", set: []crypto.PublicKey{oldKey.Public(), newKey.Public()}},
		{name: "old removed", set: []crypto.PublicKey{newKey.Public()}, oldErr: "invalid signature, no keys found"},
		{name: "old removed, no kid", set: []crypto.PublicKey{newKey.Public()}, stripKeyID: true, oldErr: "go-jose/go-jose: error in cryptographic primitive"},
		{name: "both, no kid", set: []crypto.PublicKey{newKey.Public(), oldKey.Public()}, stripKeyID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := serviceaccount.NewAuthenticator([]string{issuer}, keyIDs(keys(t, tt.set...), !tt.stripKeyID), authenticator.Audiences{apiAud}, objs, serviceaccount.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ token, wantErr string }{{oldTok, tt.oldErr}, {newTok, tt.newErr}} {
				var want *authenticator.UserInfo
				if c.wantErr == "" {
					want = &authenticator.UserInfo{
						Name: "system:serviceaccount:default:build", UID: "sa-uid",
						Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default"},
						Extra:  map[string][]string{serviceaccount.CredentialIDKey: {"JTI=jti-1"}},
					}
				}
				check(t, a, context.Background(), c.token, want, authenticator.Audiences{apiAud}, c.wantErr)
			}
		})
	}
}

// keyIDs serves keys as a verifier that ignores kid headers when byID is
// false, so every key is tried, as for tokens of signers that set no kid.
func keyIDs(k *serviceaccount.StaticKeys, byID bool) serviceaccount.PublicKeysGetter {
	if byID {
		return k
	}
	return allKeys{k}
}

type allKeys struct{ k *serviceaccount.StaticKeys }

func (a allKeys) PublicKeys(string) []serviceaccount.PublicKey { return a.k.PublicKeys("") }

func TestLegacyTokens(t *testing.T) {
	key := ecKey(t)
	legacy := signer(t, serviceaccount.LegacyIssuer, key)
	bound := signer(t, issuer, key)
	tok := sign(t, legacy, serviceaccount.LegacyClaims(sa, secret))
	held := secret.DeepCopy()
	held.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(tok)}

	objs := newObjects()
	objs.add(sa, held)
	withClaims := func(edit func(c *serviceaccount.Claims)) string {
		c := serviceaccount.LegacyClaims(sa, secret)
		edit(c)
		return sign(t, legacy, c)
	}
	// A Secret that holds some other token now.
	rotated := held.DeepCopy()
	rotated.Name = "rotated"
	rotated.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte("something else")}
	// A Secret holding a token of an earlier service account of the same name.
	reissuedTok := withClaims(func(c *serviceaccount.Claims) {
		c.LegacySecretName = "reissued"
		c.LegacyServiceAccountUID = "old-sa-uid"
	})
	reissued := held.DeepCopy()
	reissued.Name = "reissued"
	reissued.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(reissuedTok)}
	objs.add(rotated, reissued)

	user := &authenticator.UserInfo{
		Name: "system:serviceaccount:default:build", UID: "sa-uid",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default"},
	}
	tests := []struct {
		name      string
		token     string
		requested authenticator.Audiences
		want      *authenticator.UserInfo
		wantErr   string
	}{
		{name: "valid", token: tok, want: user},
		{name: "secret no longer holds it", token: withClaims(func(c *serviceaccount.Claims) { c.LegacySecretName = "rotated" }), wantErr: "Token does not match server's copy"},
		{name: "secret gone", token: withClaims(func(c *serviceaccount.Claims) { c.LegacySecretName = "missing" }), wantErr: "Token has been invalidated"},
		{name: "service account recreated", token: reissuedTok, wantErr: "ServiceAccount UID (sa-uid) does not match claim (old-sa-uid)"},
		{name: "no sub", token: withClaims(func(c *serviceaccount.Claims) { c.Subject = "" }), wantErr: "sub claim is missing"},
		{name: "no namespace", token: withClaims(func(c *serviceaccount.Claims) { c.LegacyNamespace = "" }), wantErr: "namespace claim is missing"},
		{name: "no secret name", token: withClaims(func(c *serviceaccount.Claims) { c.LegacySecretName = "" }), wantErr: "secretName claim is missing"},
		{name: "no service account name", token: withClaims(func(c *serviceaccount.Claims) { c.LegacyServiceAccountName = "" }), wantErr: "serviceAccountName claim is missing"},
		{name: "no service account uid", token: withClaims(func(c *serviceaccount.Claims) { c.LegacyServiceAccountUID = "" }), wantErr: "serviceAccountUID claim is missing"},
		{name: "sub of another account", token: withClaims(func(c *serviceaccount.Claims) { c.Subject = "system:serviceaccount:default:other" }), wantErr: "sub claim is invalid"},
		{name: "sub malformed", token: withClaims(func(c *serviceaccount.Claims) { c.Subject = "system:serviceaccount:default" }), wantErr: "sub claim is invalid"},
		{name: "for the server only", token: tok, requested: authenticator.Audiences{"vault"}, wantErr: `token audiences ["https://kplane.test"] is invalid for the target audiences ["vault"]`},
		{name: "bound token is no opinion", token: sign(t, bound, boundClaims(t, sa, serviceaccount.Binding{}, []string{apiAud}, time.Hour))},
	}
	a, err := serviceaccount.NewLegacyAuthenticator(keys(t, key.Public()), authenticator.Audiences{apiAud}, objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.requested != nil {
				ctx = authenticator.WithAudiences(ctx, tt.requested)
			}
			check(t, a, ctx, tt.token, tt.want, authenticator.Audiences{apiAud}, tt.wantErr)
		})
	}
}

func TestBoundClaimsOneObject(t *testing.T) {
	_, err := serviceaccount.BoundClaims(start, sa, serviceaccount.Binding{Pod: pod, Secret: secret}, nil, time.Hour, "")
	if err == nil || err.Error() != "internal error, token can only be bound to one object type" {
		t.Fatalf("err = %v", err)
	}
}

func TestSplitUsername(t *testing.T) {
	tests := []struct {
		in, ns, name string
		ok           bool
	}{
		{in: "system:serviceaccount:default:build", ns: "default", name: "build", ok: true},
		{in: "system:serviceaccount:default"},
		{in: "system:serviceaccount:default:a:b"},
		{in: "system:serviceaccount:Default:build"},
		{in: "system:serviceaccount::build"},
		{in: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ns, name, err := serviceaccount.SplitUsername(tt.in)
			if (err == nil) != tt.ok || ns != tt.ns || name != tt.name {
				t.Fatalf("got %q %q %v", ns, name, err)
			}
		})
	}
}
