package cache

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"kplane.dev/services/authn/internal/authenticator"
)

// Defaults are kube-apiserver's: successes for 10s, failures not at all, and
// as many entries as its 32 stripes of 128.
const (
	DefaultSuccessTTL = 10 * time.Second
	DefaultFailureTTL = 0
	DefaultMaxEntries = 4096
)

type key [sha256.Size]byte

type entry struct {
	resp *authenticator.Response
	ok   bool
	err  error
}

// reviewTimeout bounds the review that concurrent misses for one token
// share: it runs on past the caller that started it.
const reviewTimeout = 10 * time.Second

// Authenticator answers from its cache, and asks the authenticator it wraps
// on a miss; concurrent misses for one token ask once. A cached Response is
// shared by every caller that hits it and must not be modified.
type Authenticator struct {
	next       authenticator.Authenticator
	successTTL time.Duration
	failureTTL time.Duration
	cacheErrs  bool
	maxEntries int
	clock      clock.PassiveClock
	hashes     sync.Pool // of hash.Hash: HMAC-SHA256 under a per-process key

	entries *utilcache.LRUExpireCache // key -> *entry
	// reviews coalesces concurrent misses for one key: a burst of requests
	// with a new token (a controller starting) costs one review.
	reviews singleflight.Group
	// metrics records lookups and reviews; nil records nothing.
	metrics *Metrics
}

var _ authenticator.Authenticator = (*Authenticator)(nil)

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithSuccessTTL sets how long a success is remembered; 0 turns it off.
func WithSuccessTTL(d time.Duration) Option { return func(a *Authenticator) { a.successTTL = d } }

// WithFailureTTL sets how long a refusal is remembered; 0 turns it off.
func WithFailureTTL(d time.Duration) Option { return func(a *Authenticator) { a.failureTTL = d } }

// WithCacheErrors sets whether answers with an error are remembered (for the
// failure TTL) or only those without; kube-apiserver remembers them.
func WithCacheErrors(on bool) Option { return func(a *Authenticator) { a.cacheErrs = on } }

// WithMaxEntries bounds the number of remembered answers; the least recently
// used goes first.
func WithMaxEntries(n int) Option { return func(a *Authenticator) { a.maxEntries = n } }

// WithClock sets the clock entries expire by.
func WithClock(c clock.PassiveClock) Option { return func(a *Authenticator) { a.clock = c } }

// New returns a caching Authenticator in front of next.
func New(next authenticator.Authenticator, opts ...Option) (*Authenticator, error) {
	a := &Authenticator{
		next:       next,
		successTTL: DefaultSuccessTTL,
		failureTTL: DefaultFailureTTL,
		cacheErrs:  true,
		maxEntries: DefaultMaxEntries,
		clock:      clock.RealClock{},
	}
	for _, o := range opts {
		o(a)
	}
	if a.maxEntries < 1 {
		return nil, errors.New("new token cache: max entries must be positive")
	}
	a.entries = utilcache.NewLRUExpireCacheWithClock(a.maxEntries, a.clock)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("new token cache: make hash key: %w", err)
	}
	a.hashes.New = func() any { return hmac.New(sha256.New, secret) }
	return a, nil
}

// AuthenticateToken implements authenticator.Authenticator.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	auds, audsSet := authenticator.AudiencesFrom(ctx)
	k := a.key(auds, audsSet, token)
	v, hit := a.entries.Get(k)
	a.metrics.lookup(hit)
	if hit {
		e := v.(*entry)
		return e.resp, e.ok, e.err
	}
	results := a.reviews.DoChan(string(k[:]), func() (any, error) {
		// A review that ended between this caller's miss and its call
		// left its answer here: ask again only when it did not.
		if v, hit := a.entries.Get(k); hit {
			return v.(*entry), nil
		}
		// The shared review keeps the first caller's values (its
		// audiences, part of the key) but not its cancellation: the
		// others wait for it.
		reviewCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		resp, ok, err := a.next.AuthenticateToken(reviewCtx, token)
		a.metrics.fetched(err)
		e := &entry{resp: resp, ok: ok, err: err}
		ttl := a.successTTL
		if !ok {
			ttl = a.failureTTL
		}
		if ttl > 0 && (err == nil || a.cacheErrs) {
			a.entries.Add(k, e, ttl)
		}
		return e, nil
	})
	select {
	case r := <-results:
		e := r.Val.(*entry)
		return e.resp, e.ok, e.err
	case <-ctx.Done():
		return nil, false, fmt.Errorf("authenticate token: %w", ctx.Err())
	}
}

// Len is the number of remembered answers.
func (a *Authenticator) Len() int { return len(a.entries.Keys()) }

// key hashes the audiences and the token, each length-prefixed so that no two
// different requests share a key; whether audiences were given at all counts
// too, as a token with no audiences requested is checked against the
// server's own.
func (a *Authenticator) key(auds authenticator.Audiences, audsSet bool, token string) key {
	h := a.hashes.Get().(hash.Hash)
	defer a.hashes.Put(h)
	h.Reset()
	var n [binary.MaxVarintLen64]byte
	write := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	if audsSet {
		h.Write([]byte{1})
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(auds)))])
		for _, aud := range auds {
			write(aud)
		}
	} else {
		h.Write([]byte{0})
	}
	write(token)
	var k key
	h.Sum(k[:0])
	return k
}
