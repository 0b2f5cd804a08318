package tokenfile

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"kplane.dev/services/authn/internal/authenticator"
)

// Authenticator answers for the tokens of one token file. It is immutable;
// a reload builds a new one.
type Authenticator struct {
	users map[string]authenticator.UserInfo
}

var _ authenticator.Authenticator = (*Authenticator)(nil)

// New returns an Authenticator for the given tokens.
func New(users map[string]authenticator.UserInfo) *Authenticator {
	return &Authenticator{users: users}
}

// NewCSV reads the token file at path. Empty tokens are skipped and
// duplicate tokens keep the last record, each with a warning on log (which
// names the record, never the token), as kube-apiserver does.
func NewCSV(path string, log *slog.Logger) (*Authenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open token file: %w", err)
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose on close
	return Parse(f, path, log)
}

// Parse reads a token file from r; name is the file's name in messages.
func Parse(r io.Reader, name string, log *slog.Logger) (*Authenticator, error) {
	reader := csv.NewReader(r)
	reader.FieldsPerRecord = -1
	users := make(map[string]authenticator.UserInfo)
	recordNum := 0
	for {
		record, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(record) < 3 {
			return nil, fmt.Errorf("token file '%s' must have at least 3 columns (token, user name, user uid), found %d", name, len(record))
		}
		recordNum++
		if record[0] == "" {
			log.Warn("empty token in token file", "file", name, "record", recordNum)
			continue
		}
		u := authenticator.UserInfo{Name: record[1], UID: record[2]}
		if len(record) >= 4 {
			u.Groups = strings.Split(record[3], ",")
		}
		if _, dup := users[record[0]]; dup {
			log.Warn("duplicate token in token file", "file", name, "record", recordNum)
		}
		users[record[0]] = u
	}
	return &Authenticator{users: users}, nil
}

// AuthenticateToken implements authenticator.Authenticator. A token not in
// the file is no opinion, so other authenticators may still accept it.
func (a *Authenticator) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	u, ok := a.users[token]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: u}, true, nil
}
