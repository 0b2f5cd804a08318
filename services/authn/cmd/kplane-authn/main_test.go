package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"kplane.dev/libs/command"
	"kplane.dev/services/authn/internal/server"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{name: "help lists the flags", args: []string{"--help"}, wantOut: "--service-account-signing-key-file"},
		{name: "missing flags", args: nil, wantErr: "--nats-url is required"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := command.Run(context.Background(), "kplane-authn", tt.args, &out, server.NewOptions(), server.New)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("got %v, output:\n%s", err, out.String())
			}
		})
	}
}
