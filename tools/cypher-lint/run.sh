#!/usr/bin/env bash
# Lints every statement of cypher/**/*.cypher with the official Neo4j Cypher linter
# (npm @neo4j-cypher/language-support, Cypher 5). Needs Node >= 18.18 and npm
# (Debian: apt-get install -y nodejs npm). Installs the pinned package from
# package-lock.json, checks that the linter rejects a broken statement, then lints.
# Exit status: 0 when every statement passes, 1 on any error.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    else
        echo "cypher-lint: node and npm are required (apt-get install -y nodejs npm)" >&2
        exit 1
    fi
fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null

# Self-test: a broken statement, an unknown procedure and text outside a statement must fail.
broken="$(mktemp -d)"
trap 'rm -rf "$broken"' EXIT
printf '// name: broken\nMATCH (n RETURN n;\n// name: unknown\nCALL gds.pageRankk.stream($g) YIELD nodeId RETURN nodeId;\n' \
    > "$broken/a.cypher"
printf 'MATCH (n) RETURN n;\n' > "$broken/b.cypher"
if node lint.mjs "$broken" > "$broken/out.txt"; then
    cat "$broken/out.txt" >&2
    echo "cypher-lint: self-test failed: broken statements were accepted" >&2
    exit 1
fi
grep -q "3 errors" "$broken/out.txt" || { cat "$broken/out.txt" >&2; echo "cypher-lint: self-test: expected 3 errors" >&2; exit 1; }

node lint.mjs "${1:-$here/../../cypher}"
