"""Packaging and node-surface rules: cheap entry point, one host module, stable ids, tooltips,
pyproject [tool.comfy] / requirements.txt for ComfyUI-Manager and the registry."""

from __future__ import annotations

import ast
import asyncio
import re
import subprocess
import sys
from pathlib import Path

import tomllib

from nodes import node_classes

ROOT = Path(__file__).resolve().parents[2]
HOST_MODULES = {"comfy", "comfy_api", "comfy_extras", "folder_paths", "server", "execution"}

ENTRY = r"""
import importlib.util, sys, asyncio
if importlib.util.find_spec("comfy_api") is None:  # no ComfyUI here: the tests' stand-in
    sys.path.insert(0, sys.argv[1])
    from tests.kit import comfy_stand_in
    comfy_stand_in.install()
spec = importlib.util.spec_from_file_location("ComfyUI_LADR", sys.argv[1] + "/__init__.py")
mod = importlib.util.module_from_spec(spec)
sys.modules["ComfyUI_LADR"] = mod
spec.loader.exec_module(mod)
heavy = sorted(k for k in ("torch", "ladr_core", "ComfyUI_LADR.nodes", "PIL") if k in sys.modules)
print("after-import", heavy, mod.WEB_DIRECTORY)
ext = asyncio.run(mod.comfy_entrypoint())
nodes = asyncio.run(ext.get_node_list())
print("nodes", [n.define_schema().node_id for n in nodes])
"""


def test_entry_point_imports_cheaply_and_lists_the_nodes() -> None:
    out = subprocess.run([sys.executable, "-c", ENTRY, str(ROOT)], capture_output=True,
                         text=True, check=False, cwd="/")
    assert out.returncode == 0, out.stderr
    assert "after-import [] ./web" in out.stdout  # nothing heavy at import time
    # the registry's nodes, in its menu order (no id list here: tests/nodes/test_node_registry.py)
    assert f"nodes {[c.define_schema().node_id for c in node_classes()]}" in out.stdout
    assert (ROOT / "web" / "ladr_preview.js").is_file()


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_only_host_py_imports_comfyui_and_pins_one_api_version() -> None:
    files = [ROOT / "__init__.py", *sorted((ROOT / "nodes").glob("*.py")),
             *sorted((ROOT / "lab" / "workflows").glob("*.py"))]
    touching = {f.name for f in files if {m.split(".")[0] for m in _imports(f)} & HOST_MODULES}
    assert touching == {"host.py"}
    host_imports = _imports(ROOT / "nodes" / "host.py")
    assert {m for m in host_imports if m.startswith("comfy_api")} == {"comfy_api.v0_0_2"}


def test_node_surface_ids_categories_and_tooltips() -> None:
    schemas = [c.define_schema() for c in node_classes()]
    for s in schemas:
        assert s.category.startswith("LADR") and s.display_name and s.description
        for i in s.inputs:
            assert i.tooltip and len(i.tooltip) > 10, f"{s.node_id}.{i.id} needs a tooltip"
        # a node kept only for saved workflows says so in the menu (ComfyUI hides deprecated)
        assert bool(s.is_deprecated) == ("legacy" in s.display_name), s.display_name
    for node_id in ("LADR_DiMOOSampler2", "LADR_DiMOOSampler"):
        by_id = {i.id: i for i in next(s for s in schemas if s.node_id == node_id).inputs}
        assert by_id["seed"].control_after_generate and by_id["prompt"].multiline
        assert by_id["cache"].optional
        assert all(by_id[n].optional for n in ("rule", "canvas", "policy") if n in by_id)


PUBLIC = {"ladr_core", "ladr_core.dimoo", "ladr_core.calibrate"}


def test_nodes_import_the_packages_exports_only() -> None:
    """A node reaches the core through ladr_core, ladr_core.dimoo and ladr_core.calibrate (their
    lazy exports), never a module past them, lazy imports included."""
    for path in sorted((ROOT / "nodes").glob("*.py")):
        used = {m for m in _imports(path) if m.split(".")[0] == "ladr_core"}
        assert used <= PUBLIC, f"{path.name} imports {sorted(used - PUBLIC)}"


def test_pyproject_tool_comfy_and_requirements() -> None:
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    comfy = py["tool"]["comfy"]
    assert comfy["PublisherId"] and comfy["DisplayName"]
    assert re.fullmatch(r">=\s*0\.33\.\d+", comfy["requires-comfyui"])
    assert "web" not in comfy  # registered once, through WEB_DIRECTORY
    assert (ROOT / comfy["Icon"].split("/main/", 1)[1]).is_file()
    deps = {re.split(r"[<>=!~ ]", d)[0].lower() for d in py["project"]["dependencies"]}
    reqs = [ln.strip() for ln in (ROOT / "requirements.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    assert {re.split(r"[<>=!~ ]", r)[0].lower() for r in reqs} <= deps
    assert not any(r.lower().startswith("torch") for r in reqs)  # ComfyUI brings its own torch


def test_extension_registers_the_model_folder_on_load(monkeypatch) -> None:
    from nodes import extension_class, host

    called = []
    monkeypatch.setattr(host, "register_model_folder", lambda: called.append(1))
    monkeypatch.setattr(host, "install_example_inputs", lambda: called.append(2))
    ext = extension_class()()
    asyncio.run(ext.on_load())
    assert called == [1, 2]
    assert asyncio.run(ext.get_node_list()) == node_classes()


def test_example_inputs_are_copied_once_and_never_over_a_users_file(monkeypatch,
                                                                      tmp_path) -> None:
    import types

    from nodes import host

    shipped = sorted(p.name for p in host.EXAMPLE_INPUTS.glob("*.png"))
    assert shipped  # the examples' Load Image files
    inputs = tmp_path / "input"
    fake = types.SimpleNamespace(get_input_directory=lambda: str(inputs))
    monkeypatch.setattr(host, "_comfy_module", lambda name: fake if name == "folder_paths" else None)
    (inputs).mkdir()
    (inputs / shipped[0]).write_bytes(b"the user's own picture")
    assert host.install_example_inputs() == shipped[1:]
    assert (inputs / shipped[0]).read_bytes() == b"the user's own picture"
    for name in shipped[1:]:
        assert (inputs / name).read_bytes() == (host.EXAMPLE_INPUTS / name).read_bytes()
    assert host.install_example_inputs() == []  # a second start copies nothing
    # an input folder that cannot be written is a warning, and the pack still loads
    fake.get_input_directory = lambda: str(tmp_path / "a-file" / "input")
    (tmp_path / "a-file").write_text("not a folder")
    assert host.install_example_inputs() == []


def test_cfg_tooltip_names_the_scale_the_nano_model_was_tuned_for() -> None:
    import json

    import ladr_core

    raw = json.loads((ladr_core.nano_model_path() / "config.json").read_text())
    emoji = ladr_core.emoji_model_path() / "config.json"
    for node_id in ("LADR_DiMOOSampler2", "LADR_DiMOOSampler"):
        sampler = next(c for c in node_classes() if c.define_schema().node_id == node_id)
        cfg = next(i for i in sampler.define_schema().inputs if i.id == "cfg")
        assert "Lumina-DiMOO: 4.0" in cfg.tooltip
        assert f"dimoo-nano was tuned for {raw['default_cfg']:g}" in cfg.tooltip
        if emoji.is_file():
            tuned = json.loads(emoji.read_text())["default_cfg"]
            assert f", dimoo-emoji for {tuned:g};" in cfg.tooltip
