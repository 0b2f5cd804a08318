package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/cache"
)

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// backend answers "good*" tokens with a user, "bad*" with an error and
// anything else with no opinion, and counts the questions it was asked.
type backend struct{ calls map[string]int }

func (b *backend) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	auds, _ := authenticator.AudiencesFrom(ctx)
	b.calls[fmt.Sprint(auds, token)]++
	switch token[:min(3, len(token))] {
	case "goo":
		return &authenticator.Response{User: authenticator.UserInfo{Name: token}, Audiences: auds}, true, nil
	case "bad":
		return nil, false, errors.New("token has expired")
	}
	return nil, false, nil
}

type step struct {
	advance time.Duration
	token   string
	auds    authenticator.Audiences
	// wantCalls is how many times the backend has been asked about this
	// token and these audiences after the step.
	wantCalls int
}

// TestTTLs: an answer is remembered through the instant its TTL ends (kube's
// LRUExpireCache expires what is past it) and asked again after.
func TestTTLs(t *testing.T) {
	tests := []struct {
		name  string
		opts  []cache.Option
		steps []step
	}{
		{
			name: "success remembered for its TTL",
			opts: []cache.Option{cache.WithSuccessTTL(10 * time.Second)},
			steps: []step{
				{token: "good", wantCalls: 1},
				{advance: 10 * time.Second, token: "good", wantCalls: 1},
				{advance: time.Nanosecond, token: "good", wantCalls: 2},
				{token: "good", wantCalls: 2},
			},
		},
		{
			name: "no opinion remembered for the failure TTL",
			opts: []cache.Option{cache.WithFailureTTL(2 * time.Second)},
			steps: []step{
				{token: "unknown", wantCalls: 1},
				{advance: 2 * time.Second, token: "unknown", wantCalls: 1},
				{advance: time.Nanosecond, token: "unknown", wantCalls: 2},
			},
		},
		{
			name: "failures not remembered by default",
			steps: []step{
				{token: "unknown", wantCalls: 1},
				{token: "unknown", wantCalls: 2},
				{token: "bad", wantCalls: 1},
				{token: "bad", wantCalls: 2},
			},
		},
		{
			name: "errors remembered with the failure TTL",
			opts: []cache.Option{cache.WithFailureTTL(time.Minute)},
			steps: []step{
				{token: "bad", wantCalls: 1},
				{advance: time.Minute, token: "bad", wantCalls: 1},
				{advance: time.Nanosecond, token: "bad", wantCalls: 2},
			},
		},
		{
			name: "errors not remembered when switched off",
			opts: []cache.Option{cache.WithFailureTTL(time.Minute), cache.WithCacheErrors(false)},
			steps: []step{
				{token: "bad", wantCalls: 1},
				{token: "bad", wantCalls: 2},
				{token: "unknown", wantCalls: 1},
				{token: "unknown", wantCalls: 1},
			},
		},
		{
			name: "success TTL zero turns caching off",
			opts: []cache.Option{cache.WithSuccessTTL(0)},
			steps: []step{
				{token: "good", wantCalls: 1},
				{token: "good", wantCalls: 2},
			},
		},
		{
			name: "audiences are part of the key",
			steps: []step{
				{token: "good", wantCalls: 1},
				{token: "good", auds: authenticator.Audiences{"vault"}, wantCalls: 1},
				{token: "good", auds: authenticator.Audiences{"vault"}, wantCalls: 1},
				{token: "good", auds: authenticator.Audiences{"vault", "etcd"}, wantCalls: 1},
				{token: "good", auds: authenticator.Audiences{"vaultetcd"}, wantCalls: 1},
				{token: "good", wantCalls: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			b := &backend{calls: map[string]int{}}
			c, err := cache.New(b, append([]cache.Option{cache.WithClock(clk)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				ctx := context.Background()
				if s.auds != nil {
					ctx = authenticator.WithAudiences(ctx, s.auds)
				}
				resp, ok, err := c.AuthenticateToken(ctx, s.token)
				if got := b.calls[fmt.Sprint(s.auds, s.token)]; got != s.wantCalls {
					t.Fatalf("step %d: backend asked %d times, want %d", i, got, s.wantCalls)
				}
				wantOK := s.token[:3] == "goo"
				if ok != wantOK || (err != nil) != (s.token[:3] == "bad") {
					t.Fatalf("step %d: got ok=%v err=%v", i, ok, err)
				}
				if ok && (resp.User.Name != s.token || len(resp.Audiences) != len(s.auds)) {
					t.Fatalf("step %d: got %+v", i, resp)
				}
			}
		})
	}
}

func TestBoundedLRU(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(start)
	b := &backend{calls: map[string]int{}}
	c, err := cache.New(b, cache.WithClock(clk), cache.WithMaxEntries(2))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(token string, wantCalls int) {
		t.Helper()
		if _, _, err := c.AuthenticateToken(context.Background(), token); err != nil {
			t.Fatal(err)
		}
		if got := b.calls[fmt.Sprint(authenticator.Audiences(nil), token)]; got != wantCalls {
			t.Fatalf("%s: backend asked %d times, want %d", token, got, wantCalls)
		}
	}
	ask("good-1", 1)
	ask("good-2", 1)
	ask("good-1", 1) // now the most recently used
	ask("good-3", 1) // pushes out good-2
	if got := c.Len(); got != 2 {
		t.Fatalf("entries = %d, want 2", got)
	}
	ask("good-1", 1)
	ask("good-3", 1)
	ask("good-2", 2)
}

func TestNewRejectsNoRoom(t *testing.T) {
	if _, err := cache.New(&backend{}, cache.WithMaxEntries(0)); err == nil {
		t.Fatal("max entries 0: no error")
	}
}

// blockingBackend holds every review until released, counting them.
type blockingBackend struct {
	calls   atomic.Int64
	release chan struct{}
}

func (b *blockingBackend) AuthenticateToken(context.Context, string) (*authenticator.Response, bool, error) {
	b.calls.Add(1)
	<-b.release
	return &authenticator.Response{User: authenticator.UserInfo{Name: "good"}}, true, nil
}

// TestConcurrentMissesAskOnce: a burst of requests with one new token costs
// one review; every caller gets its answer, and a caller that gives up does
// not fail the others.
func TestConcurrentMissesAskOnce(t *testing.T) {
	b := &blockingBackend{release: make(chan struct{})}
	c, err := cache.New(b)
	if err != nil {
		t.Fatal(err)
	}
	const callers = 20
	var wg sync.WaitGroup
	answers := make(chan bool, callers)
	for range callers {
		wg.Go(func() {
			_, ok, err := c.AuthenticateToken(context.Background(), "good-burst")
			answers <- ok && err == nil
		})
	}
	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, _, err := c.AuthenticateToken(impatient, "good-burst")
		gaveUp <- err
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("a caller that gave up: %v, want its cancellation", err)
	}
	close(b.release)
	wg.Wait()
	close(answers)
	for ok := range answers {
		if !ok {
			t.Errorf("a caller of the shared review got no user")
		}
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("%d concurrent misses asked %d times, want once", callers, n)
	}
}
