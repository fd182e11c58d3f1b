# Two commands a newcomer needs: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-unit bench install clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ragbus demo $(ARGS)

test: $(STAMP)
	$(PY) -m pytest

test-unit: $(STAMP)
	$(PY) -m pytest -m unit

bench: $(STAMP)
	$(PY) bench/ingest_and_search.py

# Quality on fitz-gov (synthetic RAG cases; needs `pip install fitz-gov==4.1.0`), then the charts.
.PHONY: eval perf
eval: $(STAMP)
	$(PY) bench/eval_quality.py $(ARGS)
	$(PY) bench/charts.py

# The one-run performance suite (ingest ratio, bus hop, query p50/p95, tracing, 10k-1M search, memory).
perf: $(STAMP)
	$(PY) bench/perf_suite.py $(ARGS)
	$(PY) bench/charts.py

clean:
	rm -rf $(VENV) .ragbus
