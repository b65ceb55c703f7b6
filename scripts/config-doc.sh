#!/usr/bin/env bash
# Rewrites the key table of docs/reference/config.md (between the keys:begin/keys:end markers) from
# the program's own schema (./train --list-keys), so the doc cannot drift from the code.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/reference/config.md
table=$(./train --list-keys | awk -F'\t' '{ gsub(/\|/, ", ", $4); printf "| `%s` | %s | `%s` | %s |\n", $1, $2, $3, $4 }')
awk -v table="$table" '
    /<!-- keys:begin -->/ { print; print "| key | type | default | meaning |"; print "|---|---|---|---|"; print table; skip = 1; next }
    /<!-- keys:end -->/ { skip = 0 }
    !skip { print }' "$doc" > "$doc.tmp"
mv "$doc.tmp" "$doc"
echo "config-doc: $doc updated ($(./train --list-keys | wc -l) keys)"
