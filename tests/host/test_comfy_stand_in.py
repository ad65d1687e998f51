"""The tests' stand-in for ComfyUI's V3 API refuses what the real API refuses, and matches the
real `comfy_api.v0_0_2` of the host (the second part runs inside the real host's Python)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import comfy_stand_in

ROOT = Path(__file__).resolve().parents[2]
COMFY = os.environ.get("COMFYUI_PATH")


def _io():
    return comfy_stand_in._io_module()


def test_unknown_names_and_keywords_are_refused() -> None:
    io = _io()
    with pytest.raises(AttributeError):
        io.Flot  # noqa: B018 - a typo of io.Float
    with pytest.raises(AttributeError):
        io.Int.Inptu  # noqa: B018
    with pytest.raises(TypeError, match="unexpected keyword argument 'defualt'"):
        io.Int.Input("steps", defualt=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'multiline'"):
        io.Int.Input("steps", multiline=True)  # a STRING keyword on an INT
    with pytest.raises(TypeError, match="unexpected keyword argument 'node'"):
        io.Schema(node="X")
    spec = io.Float.Input("cfg", default=4.0, min=0.0)
    assert (spec.id, spec.io_type, spec.default, spec.max) == ("cfg", "FLOAT", 4.0, None)
    with pytest.raises(AttributeError):
        spec.multiline  # noqa: B018 - not a FLOAT keyword, as on the real object
    combo = io.Combo.Input("mode", ["a", "b"], default="a")  # options is positional, as real
    assert combo.options == ["a", "b"] and io.Custom("LADR_X").Output("x").io_type == "LADR_X"


REAL = r"""
import inspect, json, sys
sys.argv = [sys.argv[0], "--cpu"]
from comfy_api.v0_0_2 import ComfyExtension, io

def params(fn):
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]

kinds = {}
for name in KIND_NAMES:
    k = getattr(io, name)
    kinds[name] = [k.io_type, params(k.Input.__init__), params(k.Output.__init__)]
custom = io.Custom("LADR_PROBE")
print("REAL" + json.dumps({
    "kinds": kinds,
    "custom": [params(custom.Input.__init__), params(custom.Output.__init__)],
    "schema": params(io.Schema.__init__),
    "node_output": params(io.NodeOutput.__init__),
    "hidden": {h: getattr(io.Hidden, h).value for h in HIDDEN_NAMES},
    "node": [m for m in ("define_schema", "execute", "validate_inputs", "hidden")
             if hasattr(io.ComfyNode, m)],
    "extension": [m for m in ("on_load", "get_node_list") if hasattr(ComfyExtension, m)],
}))
"""


@pytest.mark.comfyui
@pytest.mark.skipif(not COMFY, reason="set COMFYUI_PATH to a ComfyUI checkout (scripts/test.sh "
                    "builds one from ../shared/hosts)")
def test_the_stand_in_matches_the_real_api() -> None:
    code = (REAL.replace("KIND_NAMES", repr(list(comfy_stand_in.KINDS)))
            .replace("HIDDEN_NAMES", repr(list(comfy_stand_in.HIDDEN))))
    py = os.environ.get("COMFYUI_PYTHON", sys.executable)
    out = subprocess.run([py, "-c", code], cwd=COMFY, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    real = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("REAL"))[4:])
    ours = {name: [t, list(i), list(o)] for name, (t, i, o) in comfy_stand_in.KINDS.items()}
    assert real["kinds"] == ours
    assert real["custom"] == [list(p) for p in comfy_stand_in.CUSTOM]
    assert real["schema"] == list(comfy_stand_in.SCHEMA)
    assert real["node_output"] == list(comfy_stand_in.NODE_OUTPUT)
    assert real["hidden"] == comfy_stand_in.HIDDEN
    assert real["node"] == ["define_schema", "execute", "validate_inputs", "hidden"]
    assert real["extension"] == ["on_load", "get_node_list"]
