#!/usr/bin/env bash
# Builds, once, a real ComfyUI 0.33 host for the real-host tests from the unmodified sources in
# ../shared/hosts (ComfyUI + ComfyUI-Distributed), cached OUTSIDE the repository, and prints the
# variables the tests read (eval its output). Offline: every package comes from the machine's
# package index. Exit 3 (and a reason on stderr) where the sources are absent.
#
#   eval "$(bash scripts/host.sh)"      # COMFYUI_PATH, COMFYUI_PYTHON, COMFYUI_DISTRIBUTED_PATH
#
# LADR_SHARED: the shared folder (default ../shared); LADR_HOST_CACHE: where hosts are cached
# (default ~/.cache/comfyui-ladr). The cache key is the sources' and requirements' checksum, so
# a new snapshot or a new requirement builds a new host; a half-built host is never used.
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${LADR_SHARED:-$(cd .. && pwd)/shared}"
comfy_src="$shared/hosts/comfyui-0.33.0-src.tar.gz"
dist_src=$(ls "$shared"/hosts/comfyui-distributed-*-src.tar.gz 2>/dev/null | head -n 1 || true)
if [ ! -f "$comfy_src" ] || [ -z "$dist_src" ]; then
  echo "host: no ComfyUI sources in $shared/hosts (real-host tests will skip)" >&2
  exit 3
fi
key=$(cat "$comfy_src" "$dist_src" requirements.txt | sha256sum | cut -c1-16)
host="${LADR_HOST_CACHE:-$HOME/.cache/comfyui-ladr}/host-$key"
if [ ! -f "$host/READY" ]; then
  echo "host: building ComfyUI 0.33 in $host (once; a few minutes)" >&2
  start=$(date +%s)
  rm -rf "$host" && mkdir -p "$host"
  tar -xzf "$comfy_src" -C "$host"
  tar -xzf "$dist_src" -C "$host"
  PY="${PYTHON:-python3.11}"
  command -v "$PY" >/dev/null || PY=python3
  "$PY" -m venv "$host/venv"
  pip=("$host/venv/bin/python" -m pip install -q --disable-pip-version-check)
  "${pip[@]}" torch==2.14.1 torchvision==0.29.1 torchaudio==2.11.0 2>&1 | grep -v "is ignored" >&2 || true
  grep -v -E '^(torch|torchvision|torchaudio)\b' "$host/ComfyUI/requirements.txt" > "$host/req.txt"
  "${pip[@]}" -r "$host/req.txt" -r requirements.txt 2>&1 | grep -v "is ignored" >&2 || true
  "$host/venv/bin/python" -c "import torch, aiohttp, comfy_kitchen, diffusers" >&2
  touch "$host/READY"
  echo "host: built in $(( $(date +%s) - start )) s" >&2
fi
echo "export COMFYUI_PATH='$host/ComfyUI' COMFYUI_PYTHON='$host/venv/bin/python'" \
     "COMFYUI_DISTRIBUTED_PATH='$host/ComfyUI-Distributed'"
