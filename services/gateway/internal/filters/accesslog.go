package filters

import (
	"log/slog"
	"net"

	"github.com/labstack/echo/v4"

	"kplane.dev/libs/command"
)

// auditIDHeader is the response header that carries a request's audit ID,
// kube's key for finding a request's line in the audit log.
const auditIDHeader = "Audit-ID"

// AccessLog logs a line per request when its response is done, as kube's
// httplog does: the verb, the URI, the user, the status code, the
// latency, the user agent, the client's address and the audit ID. A watch
// is logged when it ends, with how long it was open. The line is written
// after the rest of the chain has run, so it names the user that
// authentication (or impersonation) set and the code that an error
// became; it hands errors to echo's error handler itself for that.
func (f *Filters) AccessLog() echo.MiddlewareFunc {
	// Validate checked the level.
	level, _ := command.ParseLogLevel(f.cfg.AccessLogLevel)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !f.log.Enabled(c.Request().Context(), level) {
				return next(c)
			}
			start := f.clock.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			r := c.Request()
			user := ""
			if f.userName != nil {
				user = f.userName(c)
			}
			srcIP, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				srcIP = r.RemoteAddr
			}
			f.log.LogAttrs(r.Context(), level, "HTTP",
				slog.String("verb", r.Method),
				slog.String("uri", r.RequestURI),
				slog.String("user", user),
				slog.Int("code", c.Response().Status),
				slog.Duration("latency", f.clock.Since(start)),
				slog.String("user_agent", r.UserAgent()),
				slog.String("src_ip", srcIP),
				slog.String("audit_id", c.Response().Header().Get(auditIDHeader)),
			)
			return nil
		}
	}
}
