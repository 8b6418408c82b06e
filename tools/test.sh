#!/usr/bin/env bash
# The whole test suite (called by `make test`, which .ci/run calls):
# Redis for the Celery tests (stopped at the end when started here), the Cypher linter, the compose check, then pytest twice: on the
# default store (ArcadeDB), then the store contract (tests marked store_contract) on the managed Neo4j 5.26 + GDS 2.13
# (built once from Maven Central by neo4j-server/pom.xml; Java 17 and Maven from Debian).
# The explorer's browser test needs Debian's chromium + chromium-driver (installed
# here when missing, as on a fresh CI machine) and the vendored Cytoscape.js.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver
fi
bash tools/need-maven.sh
bash tools/vendor-ui.sh
# Redis for the Celery tests: started here unless one already runs, and then stopped when the
# suite ends, however it ends (nothing the suite started is left running)
REDIS_PORT="${REDIS_PORT:-6379}"
if ! redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  bash tools/start-redis.sh >/dev/null
  trap 'redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true' EXIT
fi
[ -x tools/cypher-lint/run.sh ] && bash tools/cypher-lint/run.sh
[ -x tools/check-compose.sh ] && bash tools/check-compose.sh
.venv/bin/python -c "from pathweave.servers import neo4j_server; print('managed Neo4j built in', neo4j_server.build())"
status=0
mkdir -p bench-results  # each test's duration (JUnit XML), the passes' totals (tools/test_durations.py)
rm -f bench-results/tests-arcadedb.xml bench-results/tests-neo4j.xml
echo "== the suite on ArcadeDB (the default store)"
.venv/bin/python -m pytest -q --junitxml=bench-results/tests-arcadedb.xml "$@" || status=$?
echo "== the store contract on Neo4j 5.26 + GDS 2.13"
PATHWEAVE_STORE_BACKEND=neo4j .venv/bin/python -m pytest -q --junitxml=bench-results/tests-neo4j.xml "$@" || status=$?
.venv/bin/python tools/test_durations.py --enforce bench-results/tests-arcadedb.xml bench-results/tests-neo4j.xml || status=$?
exit $status
