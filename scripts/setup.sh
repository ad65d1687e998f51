#!/usr/bin/env bash
# Creates .venv (Python 3.11) with the CPU torch wheel and the pack's dependencies.
# Idempotent: a second run only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch is pinned here, not in requirements.txt, so a ComfyUI host keeps its own build.
# 2.13.0 is the CPU wheel this workplace keeps on disk.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -r requirements-dev.txt 2>&1 | grep -v "is ignored: it is neither" || true
.venv/bin/python -c "import torch, transformers, diffusers, safetensors, pytest" 
# Live-preview widget test (tests/web/test_web_widget.py): Debian's chromium + node, npm playwright-core.
# Skips quickly when present; on failure the browser tests skip with the reason instead.
need=""
command -v chromium >/dev/null || need="chromium"
command -v node >/dev/null || need="$need nodejs npm"
if [ -n "$need" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need; } \
    >/dev/null 2>&1 || echo "setup: could not install $need (browser tests will skip)" >&2
fi
if command -v npm >/dev/null && [ ! -d tests/web/node_modules/playwright-core ]; then
  npm ci --prefix tests/web --no-audit --no-fund --silent >/dev/null 2>&1 \
    || echo "setup: npm ci in tests/web failed (browser tests will skip)" >&2
fi
