package storage

import (
	"errors"
	"fmt"
)

// ErrorCode says what kind of storage failure an Error is. The REST layer
// translates each kind to one API status in one function.
type ErrorCode int

const (
	// ErrCodeKeyNotFound: no object at the key.
	ErrCodeKeyNotFound ErrorCode = iota + 1
	// ErrCodeKeyExists: Create on a taken key.
	ErrCodeKeyExists
	// ErrCodeResourceVersionConflicts: the object changed since the
	// resourceVersion the writer read.
	ErrCodeResourceVersionConflicts
	// ErrCodeInvalidObj: a precondition (uid, resourceVersion) does not hold.
	ErrCodeInvalidObj
	// ErrCodeExpired: the requested revision was compacted away.
	ErrCodeExpired
	// ErrCodeTooLargeResourceVersion: the store has not reached the
	// requested revision yet.
	ErrCodeTooLargeResourceVersion
	// ErrCodeInvalidRequest: malformed options, such as a bad continue
	// token or resourceVersion.
	ErrCodeInvalidRequest
	// ErrCodeUnreachable: etcd did not answer.
	ErrCodeUnreachable
)

var codeNames = map[ErrorCode]string{
	ErrCodeKeyNotFound:              "key not found",
	ErrCodeKeyExists:                "key exists",
	ErrCodeResourceVersionConflicts: "resource version conflicts",
	ErrCodeInvalidObj:               "invalid object",
	ErrCodeExpired:                  "resource version expired",
	ErrCodeTooLargeResourceVersion:  "too large resource version",
	ErrCodeInvalidRequest:           "invalid request",
	ErrCodeUnreachable:              "server unreachable",
}

func (c ErrorCode) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("storage error %d", int(c))
}

// Error is the one error type storage implementations return for failures
// a client can cause or must see; anything else is an internal error.
type Error struct {
	Code ErrorCode
	Key  string
	// ResourceVersion is the revision involved, when there is one: the
	// current revision for ErrCodeTooLargeResourceVersion, the compacted
	// revision for ErrCodeExpired.
	ResourceVersion int64
	// Detail is a sentence for the client, such as the precondition that
	// failed.
	Detail string
	Err    error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %q", e.Code, e.Key)
	if e.ResourceVersion != 0 {
		msg += fmt.Sprintf(", resourceVersion %d", e.ResourceVersion)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// NewError builds an Error.
func NewError(code ErrorCode, key string, rv int64, detail string) *Error {
	return &Error{Code: code, Key: key, ResourceVersion: rv, Detail: detail}
}

// CodeOf returns the ErrorCode of err, or 0 when err is not an *Error.
func CodeOf(err error) ErrorCode {
	var se *Error
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// IsNotFound reports whether err is ErrCodeKeyNotFound.
func IsNotFound(err error) bool { return CodeOf(err) == ErrCodeKeyNotFound }

// IsExists reports whether err is ErrCodeKeyExists.
func IsExists(err error) bool { return CodeOf(err) == ErrCodeKeyExists }

// IsConflict reports whether err is ErrCodeResourceVersionConflicts.
func IsConflict(err error) bool { return CodeOf(err) == ErrCodeResourceVersionConflicts }

// IsInvalidObj reports whether err is ErrCodeInvalidObj.
func IsInvalidObj(err error) bool { return CodeOf(err) == ErrCodeInvalidObj }

// IsExpired reports whether err is ErrCodeExpired.
func IsExpired(err error) bool { return CodeOf(err) == ErrCodeExpired }
