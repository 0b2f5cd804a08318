package authenticator

import (
	"context"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Union tries each authenticator in order. The first that accepts the token
// wins; errors of those that failed are returned together only when none
// accepted it, so one authenticator's rejection does not hide another's
// success (kube's token union).
func Union(auths ...Authenticator) Authenticator {
	return &union{auths: auths}
}

// UnionFailOnError is Union, except that the first error ends the search and
// is returned as is. kube-apiserver puts the anonymous authenticator behind
// the others this way, so a bad credential is refused rather than treated as
// no credential.
func UnionFailOnError(auths ...Authenticator) Authenticator {
	return &union{auths: auths, failOnError: true}
}

type union struct {
	auths       []Authenticator
	failOnError bool
}

func (u *union) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	var errs []error
	for _, a := range u.auths {
		resp, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil {
			if u.failOnError {
				return resp, ok, err
			}
			errs = append(errs, err)
			continue
		}
		if ok {
			return resp, true, nil
		}
	}
	return nil, false, utilerrors.NewAggregate(errs)
}
