#!/usr/bin/env bash
# Every module of the workspace requires the same version of a dependency
# they share: one pinned version per module path across all go.mod files.
set -euo pipefail
cd "$(dirname "$0")/.."
mods=$(go list -m -f '{{.Dir}}/go.mod')
awk '
  /^require \(/ { inblock = 1; next }
  inblock && /^\)/ { inblock = 0; next }
  /^require [^(]/ { print FILENAME, $2, $3; next }
  inblock && NF >= 2 && $1 !~ /^\/\// { print FILENAME, $1, $2 }
' $mods | awk '
  { seen[$2] = seen[$2] " " $3 "(" $1 ")"; if (!($2 in v)) v[$2] = $3; else if (v[$2] != $3) bad[$2] = 1 }
  END { n = 0; for (m in bad) { print "different versions of " m ":" seen[m]; n++ } exit n > 0 }
'
