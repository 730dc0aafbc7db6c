# kvbench: `make run` benchmarks a throwaway local memcached; `make test` runs every test.
# Both install what is missing first: Debian packages (as root, or via sudo) and a venv.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Servers the tests start on loopback, the peer tools bench/peers compares against, the
# headless browser the HTML report test opens its page in, and the C compiler and Python
# headers the compiled driver (engine/_pump.c) is built with.
APT_PACKAGES := memcached redis-server redis-tools libmemcached-tools wrk chromium nginx libnginx-mod-http-memc nutcracker gcc python3-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# Options for bench/peers.py, e.g. make bench BENCH_ARGS="--rounds 7 --only 'redis-*'"
BENCH_ARGS ?=

.PHONY: run test lint typecheck bench deps venv pump sanitize clean

run: deps venv
	$(BIN)/kvbench run --duration 10s --pipeline 16

# The tests run in TEST_WORKERS processes (pytest-xdist), each with servers of its own:
# most of an end-to-end test is waiting (a run's window, a server's restart), so more
# workers than the 2 cores of a small CI machine still shortens the suite; idle workers
# steal queued tests from busy ones. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 4
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)

test: deps venv pump lint typecheck
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# Lint, types and the unit tier (tests/unit, tests/property): the quick loop while editing.
.PHONY: check
check: deps venv pump lint typecheck
	$(BIN)/python -m pytest -n 2 --dist worksteal -m "unit and not slow" -q $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: venv
	$(BIN)/mypy

# kvbench beside memtier_benchmark (when on PATH), redis-benchmark and memaslap, then the
# peak RSS of a 2-process run: docs/benchmarks.md.
bench: deps venv
	$(BIN)/python bench/peers.py $(BENCH_ARGS)

# The compiled driver is optional for users (pip goes on without a compiler, and runs use
# the Python driver), not for CI: with CI=true (.ci/run) a venv without it fails here.
pump: venv
	@$(BIN)/python -c "import kvbench.engine._pump" 2>/dev/null || { \
		echo "engine/_pump.c is not built: install gcc and python3-dev (make deps), then make clean test" >&2; \
		[ -z "$$CI" ]; }

# The compiled driver under AddressSanitizer and UBSan (.ci/run, after make test): built
# apart, in build/sanitize/ (the editable install keeps its normal build, which make test
# loads), and loaded in its place by tests/support/sanitize/sitecustomize.py; the Python
# (not instrumented) gets the sanitizers' runtimes preloaded and allocates with malloc, so
# that a freed object's memory is poisoned too. It runs the tests of everything that drives
# the pump (the compiled event loop's too: its Poller, and runs and replays on it against
# real and hanging-up servers, whose kvbench processes inherit the sanitized build), then
# fuzz/fuzz_pump.py over SANITIZE_SEEDS seeded exchanges of each mode. Any report (a read
# past a buffer, a use after free, undefined behaviour) fails the run; the tests capture
# only Python's output (--capture=sys), so that a report, written to the process's stderr
# as it dies, is seen.
SANITIZE_CC ?= gcc
SANITIZE_DIR := build/sanitize
SANITIZE_SO := $(SANITIZE_DIR)/_pump.so
SANITIZE_CFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -O1 -g -Wall -Wextra -Wno-unused-parameter \
	-Wno-missing-field-initializers -fvisibility=hidden -fPIC -shared
SANITIZE_TESTS := $(wildcard tests/unit/engine/test_pump*.py) tests/unit/engine/test_fastpath.py \
	tests/unit/engine/test_connection.py tests/unit/engine/test_replay_connection.py \
	tests/unit/workload/test_trace_source.py tests/unit/engine/test_loop.py \
	tests/unit/engine/test_loop_dispatch.py tests/unit/engine/test_loop_dispatch_lanes.py \
	tests/e2e/test_loop_driver.py tests/e2e/test_replay_drivers.py tests/e2e/test_http_drivers.py \
	tests/e2e/test_command_drivers.py
# --verify's runs against real servers, and a Redis Cluster's (a slot moved under load,
# redirects followed), the compiled driver's only (the Python driver's have no C to check).
SANITIZE_RUNS := tests/e2e/test_run_verify.py tests/e2e/test_run_redis_cluster.py -k compiled
SANITIZE_SEEDS ?= 2000
SANITIZE_ENV = LD_PRELOAD="$$($(SANITIZE_CC) -print-file-name=libasan.so) $$($(SANITIZE_CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	PYTHONMALLOC=malloc PYTHONPATH=$(CURDIR)/tests/support/sanitize \
	KVBENCH_SANITIZED_PUMP=$(CURDIR)/$(SANITIZE_SO)

sanitize: deps venv pump $(SANITIZE_SO)
	@$(SANITIZE_ENV) $(BIN)/python -c "from kvbench.engine import _pump; \
		assert _pump.__file__ == '$(CURDIR)/$(SANITIZE_SO)', _pump.__file__; \
		print('make sanitize: the pump is', _pump.__file__)"
	$(SANITIZE_ENV) $(BIN)/python -m pytest -q --capture=sys -p no:cacheprovider $(SANITIZE_TESTS)
	$(SANITIZE_ENV) $(BIN)/python -m pytest -q --capture=sys -p no:cacheprovider $(SANITIZE_RUNS)
	$(SANITIZE_ENV) $(BIN)/python fuzz/fuzz_pump.py --seeds $(SANITIZE_SEEDS)
	$(SANITIZE_ENV) $(BIN)/python fuzz/fuzz_pump.py --inputs $(SANITIZE_SEEDS)

$(SANITIZE_SO): $(wildcard src/kvbench/engine/_pump*.[ch]) | venv
	mkdir -p $(SANITIZE_DIR)
	$(SANITIZE_CC) $(SANITIZE_CFLAGS) \
		-I"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
		$(filter %.c,$^) -o $@

deps:
	@missing=""; \
	for pkg in $(APT_PACKAGES); do \
		dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(wildcard src/kvbench/engine/_pump*.[ch])
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
