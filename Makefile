# Pathweave: every target installs what it needs first (a fresh machine needs nothing else).
VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export OMP_WAIT_POLICY := passive

.PHONY: install demo test bench bench-api lint clean

# llama-cpp-python is built by tools/build-llama.sh (portable to any x86-64 host, no AMX) before
# the extra `llm` would have pip build it natively
$(VENV)/.installed: pyproject.toml tools/build-llama.sh
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	bash tools/build-llama.sh $(PY)
	$(PY) -m pip install -q -e ".[dev,neo4j,llm]"
	touch $@

install: $(VENV)/.installed
	bash tools/build-llama.sh $(PY)
	bash tools/vendor-ui.sh
	bash tools/fetch-models.sh $(PY)

demo: install
	$(VENV)/bin/pathweave demo

test: install
	bash tools/test.sh

bench: install
	$(VENV)/bin/pathweave bench musique

clean:
	rm -rf $(VENV) bench-results .pytest_cache
