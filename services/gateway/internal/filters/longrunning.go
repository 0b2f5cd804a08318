package filters

import (
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
)

// longRunningRetryAfter is the Retry-After, in seconds, of a long-running
// request refused for its user's limit.
const longRunningRetryAfter = 1

// userSlots counts the long-running requests each user has open.
type userSlots struct {
	limit int
	mu    sync.Mutex
	// open holds users with at least one request open, so that it never
	// outgrows the users currently watching.
	open map[string]int
}

// take counts a request of user and reports whether it is within the
// limit; a request taken must be given back.
func (s *userSlots) take(user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[user] >= s.limit {
		return false
	}
	s.open[user]++
	return true
}

func (s *userSlots) give(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[user]--; s.open[user] <= 0 {
		delete(s.open, user)
	}
}

// LongRunningPerUser answers a watch or other long-running request of a
// user who already has as many open as the limit with kube's 429
// TooManyRequests Status and Retry-After, so that one user cannot hold
// every connection the gateway can serve; other users' requests are not
// affected. Privileged users are not limited, as max-in-flight does not
// limit them.
func (f *Filters) LongRunningPerUser() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if f.longRunning == nil {
			return next
		}
		return func(c echo.Context) error {
			if !LongRunning(f.info(c)) || f.userName == nil || (f.privileged != nil && f.privileged(c)) {
				return next(c)
			}
			user := f.userName(c)
			if !f.longRunning.take(user) {
				c.Response().Header().Set("Retry-After", strconv.Itoa(longRunningRetryAfter))
				return apistatus.Write(c, apierrors.NewTooManyRequests(tooManyRequestsMessage, longRunningRetryAfter))
			}
			defer f.longRunning.give(user)
			return next(c)
		}
	}
}
