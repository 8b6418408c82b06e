#!/usr/bin/env bash
# The whole test suite (called by `make test`, which .ci/run calls):
# Redis for the Celery tests, the Cypher linter, the compose check, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x tools/start-redis.sh ] && bash tools/start-redis.sh
[ -x tools/cypher-lint/run.sh ] && bash tools/cypher-lint/run.sh
[ -x tools/check-compose.sh ] && bash tools/check-compose.sh
.venv/bin/python -m pytest -q "$@"
