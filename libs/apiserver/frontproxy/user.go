package frontproxy

import "context"

// User is who a request is made for.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra holds the rest of what the authenticator knew, keyed by
	// lowercase names such as "authentication.kubernetes.io/credential-id".
	Extra map[string][]string
}

type userKey struct{}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user ctx carries.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok && u != nil
}
