PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-properties test-grid test-llm demo lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy --strict src
	$(BIN)/lint-imports

# Two workers on the two cores; the ten slowest tests are printed so a slow one is seen.
test: lint
	$(BIN)/pytest -q -n 2 --durations=10

# The hypothesis properties at 2000 examples each (make test runs 150).
test-properties: $(STAMP)
	$(BIN)/pytest -q -n 2 -m property --hypothesis-profile=thorough

# The budget over all 15 shared conversations x windows 4000/8000/16000 x every strategy.
test-grid: $(STAMP)
	$(BIN)/pytest -q -m grid

# Real small models: builds llama-cpp-python from source on first install (pip caches the wheel).
# GGML_NATIVE=OFF builds portable AVX2 kernels instead of tuning to this CPU, so the cached
# wheel runs on any x86-64 machine with AVX2 and no CPU-specific kernel can break it.
$(VENV)/.installed-local: $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
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
