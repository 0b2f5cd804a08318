package server

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func asStatus(err error, se *apierrors.APIStatus) bool { return errors.As(err, se) }
