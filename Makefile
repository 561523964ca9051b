# The README's two commands: `make run` (set up + score the examples) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint format bench lock clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip==26.3
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	rm -f out/demo_results.jsonl
	$(BIN)/faithjudge score examples/demo.jsonl -o out/demo_results.jsonl
	@echo "results: out/demo_results.jsonl"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

# Re-pin: resolve pyproject's pins plus their dependencies into constraints.txt.
lock:
	$(PYTHON) -m venv /tmp/faithjudge-lock && /tmp/faithjudge-lock/bin/pip install -q -e '.[dev]' \
		&& /tmp/faithjudge-lock/bin/pip freeze --exclude-editable | grep -v '^faithjudge' > constraints.txt

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
