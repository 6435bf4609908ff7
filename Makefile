# Two commands set everything up on a fresh machine:
#   make run    starts the desktop app
#   make test   checks the layers and types (make lint), then runs the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export SPARKSYNC_DEV := 1

.PHONY: run lint test perf dist setup system-deps engines clean

setup: $(STAMP)

$(STAMP): pyproject.toml agent/pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ./agent[gpu,hf] -e .[gui,test,perf,bench,dist]
	# The BFCL suite's data for `switchyard eval --suite bfcl`; its own dependencies (model SDKs) are not needed.
	$(PY) -m pip install -q --no-deps bfcl-eval==2026.3.23
	touch $(STAMP)

system-deps:
	./packaging/dev/system-deps.sh

# llama.cpp's llama-server and rpc-server, built once and cached outside the clone
engines: setup system-deps
	./packaging/engines/build-llama-cpp.sh

run: setup
	$(PY) -m sparksync.gui.app

# The import contracts and mypy's settings are in pyproject.toml; mypy keeps its cache in .mypy_cache.
lint: setup
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/mypy

# TEST_WORKERS=2: two pytest workers, each taking whole test files (--dist loadfile: a file's
# module- and session-scoped labs are built once). Most of the suite waits on sshd, agents and
# engines, so two workers take well under half the time of one, even on two cores; but the
# denser load still brings out timing-sensitive tests now and then, so one process stays the
# default until they are all cleared.
TEST_WORKERS ?= 0

test: lint setup system-deps engines
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not perf" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

perf: setup system-deps engines
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m perf -s -p no:randomly tests/perf $(PYTEST_ARGS)

# The desktop app (PyInstaller, one folder) wrapped into dist/sparksync_<version>_<arch>.deb
dist: setup system-deps
	$(PY) packaging/deb/build_deb.py --out dist

clean:
	rm -rf $(VENV) build dist .mypy_cache .import_linter_cache
