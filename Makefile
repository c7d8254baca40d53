# memsync — common tasks. `make demo` and `make test` are what the README opens with.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-fast test-unit lint stress bench bench-readme clean

$(BIN)/memsync: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# setuptools says "Editable installation ... be careful with folders named like the package"
	# on every editable install (a UserWarning from the build backend): nothing to act on here
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/pip install -q -e '.[dev]'
	@touch $@

install: $(BIN)/memsync

demo: install
	$(BIN)/python demo/demo.py

# three processes on two cores: most tests wait on git, servers and subprocesses (pytest-xdist);
# then the tests of `memsync serve` on their own (marker `solo`: tests/conftest.py says why)
test: install
	$(BIN)/python -m pytest -q -n 3 -m "not solo"
	$(BIN)/python -m pytest -q -m solo

# the unit tier: one module's decisions, in-process (tests/unit; CONTRIBUTING.md says where tests go)
test-unit: install
	$(BIN)/python -m pytest -q -n 3 tests/unit -m "not stress and not attack and not server and not slow and not solo"

# the inner loop: the unit tier and the quick local tests; no servers, attack suites, stress
# campaigns or tests that take more than ~2 s (marker slow: make test runs them all)
test-fast: install
	$(BIN)/python -m pytest -q -n 3 -m "not stress and not attack and not server and not slow and not solo"

lint: install
	$(BIN)/ruff check memsync tests demo $(wildcard bench)
	$(BIN)/mypy

stress: install
	MEMSYNC_STRESS=1 $(BIN)/python -m pytest -q -m stress -p no:randomly

bench: install
	$(BIN)/python bench/bench.py

bench-readme: install
	$(BIN)/python bench/bench.py --readme

clean:
	rm -rf $(VENV) demo-work .pytest_cache .mypy_cache .ruff_cache
