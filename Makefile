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

clean:
	rm -rf $(VENV) .ragbus
