package filters

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// tooManyRequestsMessage is kube's plain-text answer to a request over the
// limit; client-go retries on the 429 and its Retry-After, not the body.
const tooManyRequestsMessage = "Too many requests, please try again later."

// MaxInFlight answers 429 with Retry-After: 1 to a request beyond the
// read-only or mutating limit, unless it is privileged. Long-running
// requests and the health endpoints are not counted: a watch holds its
// slot forever, and a probe must be answered under load.
func (f *Filters) MaxInFlight() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if isHealthPath(c.Request().URL.Path) {
				return next(c)
			}
			info := f.info(c)
			if LongRunning(info) {
				return next(c)
			}
			slots := f.mutating
			if readOnly(info) {
				slots = f.readOnly
			}
			if slots == nil {
				return next(c)
			}
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				return next(c)
			default:
			}
			if f.privileged != nil && f.privileged(c) {
				return next(c)
			}
			c.Response().Header().Set("Retry-After", "1")
			http.Error(c.Response(), tooManyRequestsMessage, http.StatusTooManyRequests)
			return nil
		}
	}
}
