#!/usr/bin/env bash
# Vendor Cytoscape.js (the reasoning explorer's graph library) into the package at
# install/build time: `npm pack` of a pinned version from the npm registry, its
# integrity checked, dist/cytoscape.min.js copied to api/pathweave_api/ui/static/
# (gitignored). The service serves it under /ui/static/; nothing is loaded from a CDN.
# Idempotent: does nothing when the pinned file is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=3.34.4
INTEGRITY="sha512-msY99tMY8iWTg+sIPGfSqDcPNOt4xcj+v/K/7qUFaCUxxlqnMkUYLBjRUzn9W5CU/R2hrmtJa5+UtovrEM2ctg=="
DEST=api/pathweave_api/ui/static
STAMP="$DEST/cytoscape.version"
if [ -f "$DEST/cytoscape.min.js" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "vendor-ui: npm is needed to vendor cytoscape@$VERSION" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "cytoscape@$VERSION" >/dev/null 2>&1)
tgz="$tmp/cytoscape-$VERSION.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 | tr -d '\n')"
if [ "$actual" != "$INTEGRITY" ]; then
  echo "vendor-ui: integrity mismatch for cytoscape@$VERSION: $actual" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$tmp" package/dist/cytoscape.min.js package/LICENSE
mkdir -p "$DEST"
cp "$tmp/package/dist/cytoscape.min.js" "$DEST/cytoscape.min.js"
cp "$tmp/package/LICENSE" "$DEST/cytoscape.LICENSE"
echo "$VERSION" > "$STAMP"
echo "vendor-ui: cytoscape@$VERSION -> $DEST/cytoscape.min.js"
