package storage

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// continueVersion names the continue token format; it is kube-apiserver's,
// so a token reads the same whichever store issued it.
const continueVersion = "meta.k8s.io/v1"

type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// EncodeContinue returns the opaque token that resumes a list of the keys
// below prefix at key (inclusive), read at revision rv.
func EncodeContinue(key, prefix string, rv int64) (string, error) {
	start, ok := strings.CutPrefix(key, prefix)
	if !ok || start == "" {
		return "", fmt.Errorf("continue key %q is not below prefix %q", key, prefix)
	}
	data, err := json.Marshal(continueToken{APIVersion: continueVersion, ResourceVersion: rv, StartKey: start})
	if err != nil {
		return "", fmt.Errorf("encode continue token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(data), nil
}

// DecodeContinue returns the key a token resumes at below prefix and the
// revision its list was read at. A malformed token, or one whose start key
// would escape prefix, is ErrCodeInvalidRequest.
func DecodeContinue(token, prefix string) (key string, rv int64, err error) {
	invalid := func(detail string) error {
		return NewError(ErrCodeInvalidRequest, prefix, 0, "continue key is not valid: "+detail)
	}
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, invalid("not base64")
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return "", 0, invalid("not a continue token")
	}
	switch {
	case c.APIVersion != continueVersion:
		return "", 0, invalid(fmt.Sprintf("server does not recognize version %q", c.APIVersion))
	case c.ResourceVersion <= 0:
		return "", 0, invalid(fmt.Sprintf("incorrect encoded start resourceVersion (version %s)", continueVersion))
	case c.StartKey == "":
		return "", 0, invalid(fmt.Sprintf("encoded start key empty (version %s)", continueVersion))
	}
	// The start key is joined to the prefix, so it must not climb out of it.
	if path.Clean(c.StartKey) != c.StartKey || strings.HasPrefix(c.StartKey, "/") || strings.HasPrefix(c.StartKey, "..") {
		return "", 0, invalid(fmt.Sprintf("start key %q is not a clean relative key", c.StartKey))
	}
	return prefix + c.StartKey, c.ResourceVersion, nil
}
