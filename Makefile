# The two commands a new user runs: `make demo` and `make test`.
# Each creates .venv and installs what it needs (system packages included, where root).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lab clean install

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m crystal_kernel.demo

test: $(STAMP)
	$(PY) -m crystal_kernel.testing.run_tests

bench: $(STAMP)
	$(PY) -m bench

lab: $(STAMP)
	$(VENV)/bin/crystal kernel install --sys-prefix
	$(VENV)/bin/jupyter lab --notebook-dir=build/demo

clean:
	rm -rf $(VENV) build
