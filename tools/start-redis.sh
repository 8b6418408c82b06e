#!/usr/bin/env bash
# Install (Debian package, if missing) and start redis-server on 127.0.0.1, daemonized.
# Used by .ci/run before the tests; idempotent: does nothing if Redis already answers.
#
#   tools/start-redis.sh            # port 6379 (or $REDIS_PORT)
#   REDIS_PORT=6380 tools/start-redis.sh
#
# Prints the broker URL to use (export PATHWEAVE_WORKER_BROKER_URL=...) on success.
set -euo pipefail

PORT="${REDIS_PORT:-6379}"
DIR="${REDIS_DIR:-${TMPDIR:-/tmp}/pathweave-redis-$PORT}"

if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    echo "installing redis-server (apt-get)..." >&2
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >&2
fi

if redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1; then
    echo "redis already running on 127.0.0.1:$PORT" >&2
else
    mkdir -p "$DIR"
    # Loopback only, no persistence (a broker for tests and local runs), daemonized.
    redis-server --bind 127.0.0.1 --port "$PORT" --protected-mode yes --daemonize yes \
        --dir "$DIR" --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" \
        --save "" --appendonly no
    for _ in $(seq 1 50); do
        redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null || { echo "redis did not start; see $DIR/redis.log" >&2; exit 1; }
    echo "redis started on 127.0.0.1:$PORT (pid $(cat "$DIR/redis.pid"), dir $DIR)" >&2
fi
echo "redis://127.0.0.1:$PORT/0"
