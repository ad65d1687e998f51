#!/usr/bin/env bash
# The project's test command: set up .venv, lint, build (once, cached outside the repository) a
# real ComfyUI host from ../shared/hosts, and run the whole suite on CPU, the real-host tests
# included: tests/ on a copy of the tree without lab/, then lab/tests (pytest options go to both).
# Without ../shared/hosts those tests skip with the reason (README, "Tests").
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup.sh
.venv/bin/python -m ruff check .
if host_env=$(bash scripts/host.sh); then
  eval "$host_env"
else
  echo "test: no real ComfyUI host; the real-host tests will skip" >&2
fi
status=0
# Both cores (pytest-xdist), a test file to one worker so its module fixtures (a ComfyUI
# server, a loaded pipeline) are built once; LADR_TEST_WORKERS=0 runs in one process.
xdist=(-n "${LADR_TEST_WORKERS:-2}" --dist loadfile)
# the product's tests on a copy of the tree without lab/ (they must not need it), then the lab's
product=$(mktemp -d)
trap 'rm -rf "$product"' EXIT
bash scripts/without_lab.sh "$product"
(cd "$product" && .venv/bin/python -m pytest -q -p no:cacheprovider "${xdist[@]}" tests "$@") || status=$?
.venv/bin/python -m pytest -q "${xdist[@]}" lab/tests "$@" || status=$?
echo "test: $(( $(date +%s) - start )) s in all (setup, lint, host, tests)"
exit "$status"
