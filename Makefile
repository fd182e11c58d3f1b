# Two commands a newcomer needs: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-unit bench install clean lock

DEV_STAMP := $(VENV)/.installed-dev

# The demo needs only the runtime dependencies; the dev extra (tests, eval data, charts) is
# for `make test`. pip's own progress is shown: the first install takes a few minutes.
# Each installs its lock (every dependency at a pinned version), then the project itself.
$(STAMP): pyproject.toml requirements.txt
	@echo "installing ragbus and its runtime dependencies into $(VENV) (a few minutes the first time) ..."
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -r requirements.txt
	$(PY) -m pip install --progress-bar on --no-deps -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.txt
	@echo "installing the dev extra (tests, evaluation, charts) into $(VENV) ..."
	@echo "(llama-cpp-python, for the RAGBUS_LLM=openai tests, compiles llama.cpp: several minutes)"
	@# GGML_NATIVE=OFF: a native build of 0.3.36 segfaults on its first completion on this kind of machine
	CMAKE_ARGS="$${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}" $(PY) -m pip install --progress-bar on -r requirements-dev.txt
	$(PY) -m pip install --progress-bar on --no-deps -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ragbus demo $(ARGS)

# The suite in two processes (pytest-xdist), one per core of this project's 2-core machines: much of
# its time waits on `ragbus` subprocesses, servers and emulators, leaving a core idle in one process
# (docs/development.md). Each test file runs whole in one of them (--dist loadfile), so a module's
# fixture (a server, an ingested corpus) is still built once. Files are handed out longest first
# (tests/conftest.py, from tests/durations.json), not most tests first (xdist's default reorder), so
# no long file starts last and ends the run alone.
test: $(DEV_STAMP)
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder

test-unit: $(DEV_STAMP)
	$(PY) -m pytest -m unit

bench: $(DEV_STAMP)
	$(PY) bench/ingest_and_search.py

# Quality on fitz-gov (synthetic RAG cases; the dev extra installs it), then the charts.
.PHONY: eval perf
eval: $(DEV_STAMP)
	$(PY) bench/eval_quality.py $(ARGS)
	$(PY) bench/charts.py

# The one-run performance suite (ingest ratio, bus hop, query p50/p95, tracing, 10k-1M search, memory).
perf: $(DEV_STAMP)
	$(PY) bench/perf_suite.py $(ARGS)
	$(PY) bench/charts.py

# Re-resolve the locks from pyproject.toml for linux x86_64 and the oldest Python the project
# supports (3.11, what CI and `make test` run): requirements.txt (what Cloud Functions installs)
# and requirements-dev.txt. The functions run Python 3.13 (infra/functions.tf): the last line
# re-resolves the runtime lock for 3.13 from wheels only, pinned to requirements.txt, so a pin
# without a 3.13 wheel fails here, not in a deploy. The machine's uv configuration (files:
# UV_NO_CONFIG; index variables: unset) is set aside, so uv resolves from its default index,
# PyPI; no address is written here.
LOCK_FLAGS := --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--custom-compile-command "make lock" --quiet
LOCK_ENV := env -u UV_INDEX -u UV_INDEX_URL -u UV_DEFAULT_INDEX -u UV_EXTRA_INDEX_URL -u UV_FIND_LINKS UV_NO_CONFIG=1
lock: $(DEV_STAMP)
	$(LOCK_ENV) $(VENV)/bin/uv pip compile pyproject.toml $(LOCK_FLAGS) -o requirements.txt
	$(LOCK_ENV) $(VENV)/bin/uv pip compile pyproject.toml --extra dev $(LOCK_FLAGS) -o requirements-dev.txt
	$(LOCK_ENV) $(VENV)/bin/uv pip compile pyproject.toml --python-version 3.13 --python-platform x86_64-manylinux_2_28 \
		--only-binary :all: -c requirements.txt --quiet -o /dev/null

clean:
	rm -rf $(VENV) .ragbus
