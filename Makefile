# The README's two commands: `make run` (set up, score and report the examples, start the
# service and show a first score with curl) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run serve test lint format bench lock clean

# torch goes first, pinned: the sidecar extra accepts a range, and an unpinned resolve could pick
# a multi-GB CUDA build. On a CUDA machine install the matching torch build before `make install`.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip==26.3
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,postgres,sidecar,litellm]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	rm -f out/demo_results.jsonl
	$(BIN)/faithjudge score examples/demo.jsonl -o out/demo_results.jsonl
	$(BIN)/faithjudge report out/demo_results.jsonl --html out/demo_report.html \
		--md out/demo_report.md --requests examples/demo.jsonl
	@echo "results: out/demo_results.jsonl; report: out/demo_report.html"
	BIN=$(BIN) scripts/first_score.sh

# The REST service on the embedded defaults (SQLite job store in ~/.faithjudge, offline judge).
serve: $(STAMP)
	$(BIN)/faithjudge serve --host 127.0.0.1 --port 8000

test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider

# ruff, then mypy (strict on service/faithjudge/scoring and service/faithjudge/transport, default elsewhere)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

# Re-pin: resolve pyproject's pins plus their dependencies into constraints.txt. The project's own
# distributions (faithjudge, and faithjudge-client should it be installed there) are not pins.
lock:
	$(PYTHON) -m venv /tmp/faithjudge-lock && /tmp/faithjudge-lock/bin/pip install -q torch==2.13.0 \
		&& /tmp/faithjudge-lock/bin/pip install -q -e '.[dev,postgres,sidecar,litellm]' \
		&& /tmp/faithjudge-lock/bin/pip freeze --exclude-editable \
		| grep -v -i -E '^faithjudge([-_]client)?( |==|@)' > constraints.txt

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .mypy_cache
