"""The missing-checkpoint notice (web/ladr_checkpoint_hint.js, web/ladr_checkpoint.js) in node:
a Load DiMOO Model whose model_name is not among its choices gets one notice saying what the
host's "rejected the value for model_name" will mean and where the folder goes; an installed
one gets none. The real frontend shows it as a toast: tests/web/test_web_frontend_views.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.browser import extension_stub

from nodes.loader import NANO, LoadDiMOOModel

ROOT = Path(__file__).resolve().parents[2]


def _node(script: str, *args: object, cwd: Path | None = None) -> object:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/setup.sh installs nodejs)")
    proc = subprocess.run(["node", "--input-type=module", "-e", script, json.dumps(args)],
                          capture_output=True, text=True, timeout=60, check=False, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


HINT = f"""
import {{ missingCheckpoint }} from "{(ROOT / "web" / "ladr_checkpoint_hint.js").as_uri()}";
const [cases] = JSON.parse(process.argv[1]);
console.log(JSON.stringify(cases.map(([v, c, f]) => missingCheckpoint(v, c, f))))
"""


def _files() -> dict:
    """The schema's one-file formats (the registry's), as the extension reads them."""
    spec = next(i for i in LoadDiMOOModel.define_schema().inputs if i.id == "model_name")
    return spec.extra_dict["ladr_files"]


def test_notice_names_the_folder_and_what_the_hosts_message_means() -> None:
    files = _files()
    assert files == {".gguf": "GGUF file"}
    folder, gguf, installed, unknown = _node(HINT, [
        ["Lumina-DiMOO", [NANO], files],
        ["DiMOO-Q4_K_M.gguf", [NANO, "Lumina-DiMOO"], files],
        ["Lumina-DiMOO", [NANO, "Lumina-DiMOO"], files],
        ["Lumina-DiMOO", None, files],
    ])
    assert folder["severity"] == "warn" and "'Lumina-DiMOO' is not installed" in folder["summary"]
    for text in ("rejected the value for model_name", "ComfyUI/models/lumina_dimoo/Lumina-DiMOO/",
                 "huggingface-cli download Alpha-VLLM/Lumina-DiMOO", "press R", NANO):
        assert text in folder["detail"], text
    assert "Put the GGUF file at ComfyUI/models/lumina_dimoo/DiMOO-Q4_K_M.gguf" in gguf["detail"]
    assert "huggingface-cli" not in gguf["detail"]
    assert installed is None and unknown is None


LOAD = """
import { app } from "./scripts/app.js";
await import("./extensions/ComfyUI-LADR/ladr_checkpoint.js");
const [nodes] = JSON.parse(process.argv[1]);
for (const [type, value, choices] of nodes) {
  app.extensions[0].loadedGraphNode({ type, widgets: [
    { name: "model_name", value, options: { values: choices } }] });
}
console.log(JSON.stringify(app.toasts));
"""


def test_one_notice_per_missing_checkpoint_when_a_workflow_opens(tmp_path: Path) -> None:
    extension_stub(tmp_path, app_js=(
        "export const app = { extensions: [], toasts: [], registerExtension(e) { "
        "this.extensions.push(e); }, extensionManager: { toast: { add(t) { "
        "app.toasts.push(t); } } } };"))
    (tmp_path / "package.json").write_text('{"type": "module"}')
    toasts = _node(LOAD, [
        ["LADR_LoadDiMOOModel", "Lumina-DiMOO", [NANO]],
        ["LADR_LoadDiMOOModel", "Lumina-DiMOO", [NANO]],  # a second loader: no second notice
        ["LADR_LoadDiMOOModel", NANO, [NANO]],  # installed: nothing
        ["CheckpointLoaderSimple", "missing.safetensors", []],  # not ours: nothing
    ], cwd=tmp_path)
    assert len(toasts) == 1 and toasts[0]["life"] >= 10000
    assert "Lumina-DiMOO" in toasts[0]["summary"]
