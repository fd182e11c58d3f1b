# Two commands a newcomer needs: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-unit bench install clean

DEV_STAMP := $(VENV)/.installed-dev

# The demo needs only the runtime dependencies; the dev extra (tests, eval data, charts) is
# for `make test`. pip's own progress is shown: the first install takes a few minutes.
$(STAMP): pyproject.toml
	@echo "installing ragbus and its runtime dependencies into $(VENV) (a few minutes the first time) ..."
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@echo "installing the dev extra (tests, evaluation, charts) into $(VENV) ..."
	$(PY) -m pip install --progress-bar on -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ragbus demo $(ARGS)

test: $(DEV_STAMP)
	$(PY) -m pytest

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

clean:
	rm -rf $(VENV) .ragbus
