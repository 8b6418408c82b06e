#!/usr/bin/env bash
# The whole test suite (called by `make test`, which .ci/run calls):
# Redis for the Celery tests, the Cypher linter, the compose check, then pytest.
# The explorer's browser test needs Debian's chromium + chromium-driver (installed
# here when missing, as on a fresh CI machine) and the vendored Cytoscape.js.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver
fi
bash tools/vendor-ui.sh
[ -x tools/start-redis.sh ] && bash tools/start-redis.sh
[ -x tools/cypher-lint/run.sh ] && bash tools/cypher-lint/run.sh
[ -x tools/check-compose.sh ] && bash tools/check-compose.sh
.venv/bin/python -m pytest -q "$@"
