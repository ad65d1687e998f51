#!/usr/bin/env bash
# The project's test command: set up .venv, lint, run the whole suite on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m ruff check .
exec .venv/bin/python -m pytest -q "$@"
