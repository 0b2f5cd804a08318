#!/usr/bin/env bash
# Imports go one way: proto <- libs <- services/*, and no service imports
# another; deploy (the launcher) and test sit on top and nothing imports them
# but test.
# go list prints every package's imports; this fails on any edge that breaks the rule.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
while read -r pkg imports; do
  for imp in $imports; do
    case "$pkg" in
      kplane.dev/proto*)
        case "$imp" in kplane.dev/libs*|kplane.dev/services*) echo "$pkg imports $imp: proto imports nothing of kplane"; fail=1;; esac;;
      kplane.dev/libs*)
        case "$imp" in kplane.dev/services*|kplane.dev/test*|kplane.dev/deploy*) echo "$pkg imports $imp: libs may import only proto"; fail=1;; esac;;
      kplane.dev/services/*)
        svc=$(echo "$pkg" | cut -d/ -f3)
        case "$imp" in
          kplane.dev/services/"$svc"|kplane.dev/services/"$svc"/*) ;;
          kplane.dev/services/*) echo "$pkg imports $imp: a service imports no other service"; fail=1;;
          kplane.dev/test*|kplane.dev/deploy*) echo "$pkg imports $imp: services import only libs and proto"; fail=1;;
        esac;;
    esac
  done
done < <(for m in $(go list -m -f '{{.Dir}}'); do (cd "$m" && go list -test -f '{{.ImportPath}} {{join .Imports " "}}' ./...); done)
exit $fail
