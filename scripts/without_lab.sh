#!/usr/bin/env bash
# Copy this checkout without lab/ into DEST (an empty folder): the files git knows (tracked, and
# new ones it does not ignore) as they are in the working tree, and links to what setup.sh
# installed beside them (.venv; tests/web/node_modules, which the browser tests need).
# scripts/test.sh runs the product's tests there, which shows they need no part of the lab.
#   bash scripts/without_lab.sh DEST
set -euo pipefail
dest=$(cd "${1:?usage: without_lab.sh DEST}" && pwd)
cd "$(dirname "$0")/.."
git ls-files -z --cached --others --exclude-standard -- . ':!lab' \
  | while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done \
  | tar --null -T - -cf - | tar -xf - -C "$dest"
ln -s "$PWD/.venv" "$dest/.venv"
if [ -d tests/web/node_modules ]; then
  ln -s "$PWD/tests/web/node_modules" "$dest/tests/web/node_modules"
fi
