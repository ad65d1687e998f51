"""ladr_core must import with every ComfyUI host module blocked (docs/CONVENTIONS.md: a host-free core)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = r"""
import sys, importlib.abc
BLOCKED = ("comfy", "comfy_api", "comfy_extras", "folder_paths", "server", "execution", "nodes")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"host module {name} imported by ladr_core")
        return None
sys.meta_path.insert(0, Block())
import pkgutil, importlib, ladr_core
for m in pkgutil.walk_packages(ladr_core.__path__, "ladr_core."):
    importlib.import_module(m.name)
    print(m.name)
leaked = sorted(k for k in sys.modules if k.split(".")[0] in BLOCKED)
assert not leaked, leaked
"""


def test_ladr_core_imports_without_host() -> None:
    out = subprocess.run(
        [sys.executable, "-c", BLOCKER], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "ladr_core.assets" in out.stdout
