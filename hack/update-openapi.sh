#!/usr/bin/env bash
# Regenerates the OpenAPI definitions of the built-in types kplane serves
# (libs/apiserver/openapi/builtin/zz_generated.openapi.go) with openapi-gen at
# the version libs/go.mod pins as a tool.
set -euo pipefail
cd "$(dirname "$0")/../libs"

# Packages whose types are served, or referenced by served types.
packages=(
  k8s.io/api/core/v1
  k8s.io/api/coordination/v1
  k8s.io/api/events/v1
  k8s.io/api/rbac/v1
  k8s.io/api/admissionregistration/v1
  k8s.io/api/authentication/v1
  k8s.io/api/authorization/v1
  k8s.io/api/apidiscovery/v2
  k8s.io/api/autoscaling/v1
  k8s.io/apimachinery/pkg/apis/meta/v1
  k8s.io/apimachinery/pkg/runtime
  k8s.io/apimachinery/pkg/util/intstr
  k8s.io/apimachinery/pkg/api/resource
  k8s.io/apimachinery/pkg/version
  k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1
  k8s.io/kube-aggregator/pkg/apis/apiregistration/v1
)

header=$(mktemp)
report=$(mktemp)
trap 'rm -f "$header" "$report"' EXIT
: >"$header"

# API rule violations are the upstream types' own (kube keeps an exception
# list for them); they are not ours to fix, so the report is discarded.
go tool openapi-gen \
  --go-header-file "$header" \
  --output-dir apiserver/openapi/builtin \
  --output-pkg kplane.dev/libs/apiserver/openapi/builtin \
  --output-file zz_generated.openapi.go \
  --report-filename "$report" \
  "${packages[@]}"
gofmt -w apiserver/openapi/builtin/zz_generated.openapi.go
