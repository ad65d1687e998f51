"""Build (once per torch version, cached outside the repository) and load guard.cpp: a no-op
CUDA device guard for a CPU-only torch, without which torch's Python bindings refuse to index or
copy a tensor whose device is "cuda" ("PyTorch is not linked with support for cuda devices").

It is compiled with the machine's g++ against the headers and libc10 of the installed torch (one
second); the cache is ``$LADR_CUDA_EMU_CACHE`` or ``~/.cache/ladr-cuda-emu/<torch version>``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("guard.cpp")
_NAME = "cuda_emu_guard"
_loaded = False


class GuardBuildError(RuntimeError):
    """The guard could not be compiled (no g++, no torch headers): the emulation cannot run."""


def _cache_dir() -> Path:
    root = os.environ.get("LADR_CUDA_EMU_CACHE") or Path.home() / ".cache" / "ladr-cuda-emu"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return Path(root) / f"{torch.__version__}-abi{abi}"


def _build(target: Path) -> None:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise GuardBuildError("the CUDA emulation needs a C++ compiler (g++) to build its device "
                              "guard; install g++ (Debian: apt-get install g++)")
    torch_dir = Path(torch.__file__).parent
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [compiler, "-O1", "-shared", "-fPIC", "-std=c++17",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
           f"-I{torch_dir / 'include'}", f"-I{sysconfig.get_paths()['include']}",
           str(_SOURCE), f"-L{torch_dir / 'lib'}", "-lc10",
           f"-Wl,-rpath,{torch_dir / 'lib'}", "-o", str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise GuardBuildError(f"building the CUDA emulation's device guard failed:\n"
                              f"{' '.join(cmd)}\n{done.stderr[-2000:]}")
    os.replace(tmp, target)  # atomic: a concurrent build never leaves a half-written file


def load_guard() -> None:
    """Register the no-op CUDA guard in this process (idempotent). Refuses on a CUDA build of
    torch, which has a real guard (and a GPU to test on)."""
    global _loaded
    if _loaded:
        return
    if torch.backends.cuda.is_built():
        raise GuardBuildError("this torch is built with CUDA: the emulation is for CPU-only "
                              "builds; test on the GPU itself")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    target = _cache_dir() / f"{_NAME}{suffix}"
    if not target.exists() or target.stat().st_mtime < _SOURCE.stat().st_mtime:
        _build(target)
    loader = importlib.machinery.ExtensionFileLoader(_NAME, str(target))
    spec = importlib.util.spec_from_file_location(_NAME, target, loader=loader)
    assert spec is not None
    loader.exec_module(importlib.util.module_from_spec(spec))
    _loaded = True
