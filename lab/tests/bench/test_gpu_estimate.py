"""lab/benchmarks/gpu_estimate as a program: the memory and FLOP estimate of the 8B model on the
emulated CUDA device (tests/kit/cuda_emu, shape-only storage), checked on the tiny shape.

* shape-only storage changes nothing in the accounting: the same run with real values
  (``--storage cpu``) gives the same bytes, allocated and reserved, call by call;
* the weights are the parameter and buffer bytes of the same layout built on the CPU, each
  storage rounded up to 512 bytes as the caching allocator rounds it (streaming: what stays on
  the device, the two block slots included);
* a full call's FLOPs are exactly 2 x (linear parameters) x tokens, plus the attention products
  4 x heads x head_dim x L^2 per row and layer, plus the codebook projection of the code slots; a
  cached call's the same over its recomputed slots attending to whole rows;
* the documents' generated parts are what the committed JSON gives, and their tables show its
  figures;
* an unknown layout, size or strategy is refused in one message naming the choices.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from typing import Any

import pytest
import torch
from support import ROOT
from support.scripts import run_script

from ladr_core.dimoo import MLCacheConfig
from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.offload import ALIGN, SLOTS
from ladr_core.dimoo.model.transformer import LLaDAModel
from tests.kit.variants import build_variant

LAYOUTS = "bf16,fp8,int8,low_vram"  # the GGUF layouts take longest; the 8B run covers them
TINY = ["--shape", "tiny", "--layouts", LAYOUTS, "--sizes", "64", "--batches", "1"]
COMMITTED = ROOT / "lab" / "results" / "gpu_estimate.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The tiny estimate with shape-only and with real storage, run side by side."""
    out = tmp_path_factory.mktemp("gpu_estimate")
    procs = {storage: subprocess.Popen(
        [sys.executable, "-m", "lab.benchmarks.gpu_estimate", *TINY, "--storage", storage,
         "--json", str(out / f"{storage}.json")], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for storage in ("meta", "cpu")}
    for proc in procs.values():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    return {s: json.loads((out / f"{s}.json").read_text()) for s in procs}


def _figures(doc: dict[str, Any]) -> dict[str, Any]:
    """Every number of the layouts' rows by path (timings left out)."""
    flat: dict[str, Any] = {}

    def walk(x: Any, path: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k != "seconds":
                    walk(v, f"{path}/{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            flat[path] = x

    walk(doc["layouts"], "")
    return flat


def test_shape_only_storage_counts_the_same_bytes(runs: dict[str, dict[str, Any]]) -> None:
    meta, real = _figures(runs["meta"]), _figures(runs["cpu"])
    assert meta == real
    assert sum("peak_allocated" in k for k in meta) >= 20  # every call of every case compared
    assert runs["meta"]["device"].startswith("estimated: CUDA emulation with meta storage on ")
    assert {"git_commit", "torch"} <= set(runs["meta"]["env"])


def _rounded(nbytes: int) -> int:
    return max(512, -(-nbytes // 512) * 512)


def _storages(tensors: list[torch.Tensor]) -> int:
    seen = {t.untyped_storage()._cdata: t.untyped_storage().nbytes() for t in tensors}
    return sum(_rounded(n) for n in seen.values())


def _expected_weights(layout: str, config: LLaDAConfig) -> int:
    if layout == "bf16":  # gpu_check's bf16 layout: the plain model in the compute dtype
        model = LLaDAModel(config)
    else:
        model = build_variant(config, "cpu", "fp8" if layout == "low_vram" else layout,
                              torch.float32)
    tensors = list(model.parameters()) + list(model.buffers())
    if layout != "low_vram":
        return _storages(tensors)
    t = LLaDAModel(config).model.transformer  # streamed: the rest, and two slots of a block
    rest = [p for n, p in t.named_parameters() if not n.startswith("blocks.")]
    block = max(sum(-(-p.numel() * p.element_size() // ALIGN) * ALIGN for p in b.parameters())
                for b in t.blocks)
    return _storages(rest) + SLOTS * _rounded(block)


@pytest.mark.parametrize("layout", LAYOUTS.split(","))
def test_weights_are_the_parameter_bytes_as_the_allocator_rounds_them(
        runs: dict[str, dict[str, Any]], layout: str) -> None:
    doc = runs["meta"]
    config = LLaDAConfig.from_dict(doc["config"], source="the estimate's config")
    assert doc["layouts"][layout]["weights_bytes"] == _expected_weights(layout, config)


def _call_flops(config: dict[str, Any], case: dict[str, Any], queries: list[int]) -> int:
    """FLOPs of one pass over ``queries[r]`` tokens of each row r (all of them: a full call)
    attending to the whole row (``case["row_lengths"]``); code slots projected on the codebook."""
    d, h, heads = config["d_model"], config["mlp_hidden_size"], config["n_heads"]
    kv = d if config["n_kv_heads"] is None else config["n_kv_heads"] * d // heads
    linear = d * d + 2 * d * kv + d * d + 3 * d * h
    attention = sum(4 * d * q * length for q, length in zip(queries, case["row_lengths"],
                                                             strict=True))
    per_layer = 2 * linear * sum(queries) + attention
    codes = case["n_codes"] if queries == case["row_lengths"] else queries[0]
    head = 2 * d * case["codebook_size"] * codes * len(queries)
    return config["n_layers"] * per_layer + head


def test_flops_of_a_full_and_a_cached_call_follow_from_the_shapes(
        runs: dict[str, dict[str, Any]]) -> None:
    doc = runs["meta"]
    full = doc["layouts"]["bf16"]["cases"]["64/1/none"]
    assert full["steps"][-1]["flops"] == _call_flops(doc["config"], full, full["row_lengths"])
    cached = doc["layouts"]["bf16"]["cases"]["64/1/ml-cache"]
    m = MLCacheConfig().n_recompute(cached["n_codes"])  # the official cache ratio
    got = [s["flops"] for s in cached["steps"] if s["kind"] == "cached"]
    assert got and set(got) == {_call_flops(doc["config"], cached, [m, m])}


@pytest.mark.committed_result("lab/results/gpu_estimate.json")
def test_documents_hold_what_the_committed_estimate_says() -> None:
    proc = run_script("lab.benchmarks.gpu_estimate", "--docs", "--check", ok=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.committed_result("lab/results/gpu_estimate.json")
def test_the_layout_table_shows_the_json_figures() -> None:
    doc = json.loads(COMMITTED.read_text())
    text = (ROOT / "docs" / "reports" / "GPU.md").read_text()
    block = text[text.index("<!-- gpu_estimate:begin estimate -->"):]
    table = block[block.index("| layout | weights |"):].split("\n\n")[0].splitlines()
    columns = [c.strip() for c in table[0].strip("|").split("|")][2:]
    rows = {r.split("|")[1].strip(): r for r in table[2:]}
    assert len(rows) == len(doc["layouts"])
    for name, row in rows.items():
        layout = doc["layouts"][NAMES[name]]
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert float(cells[0]) == round(layout["weights_bytes"] / 2 ** 30, 2)
        for title, cell in zip(columns, cells[1:], strict=True):
            px, b, cache = re.fullmatch(r"(\d+) px B=(\d+)( \+ ML-Cache)?", title).groups()
            case = layout["cases"][f"{px}/{b}/{'ml-cache' if cache else 'none'}"]
            alloc, res = (float(x) for x in cell.split(" / "))
            assert alloc == round(case["peak_allocated"] / 2 ** 30, 2)
            assert res == round(case["peak_reserved"] / 2 ** 30, 2)
    assert math.isclose(doc["compute"]["peak_flops"], 989e12)


NAMES = {"bf16": "bf16", "fp8 storage (per-channel scales)": "fp8",
         "bf16, blocks streamed (composed)": "low_vram", "ComfyUI fp8": "comfy_fp8",
         "ComfyUI int8": "int8", "GGUF Q8_0": "q8_0", "GGUF Q4_K_M": "q4_k_m"}


BAD = {"--layouts": ("bf17", "bf16, fp8, low_vram, comfy_fp8, int8, q8_0, q4_k_m"),
       "--sizes": ("768", "512, 1024"), "--strategies": ("ladr-fast", "baseline-64")}


def test_unknown_choices_are_refused_naming_the_choices() -> None:
    """A bad layout, size or strategy: exit status 2 and one line naming every choice."""
    procs = {option: subprocess.Popen(
        [sys.executable, "-m", "lab.benchmarks.gpu_estimate", option, value], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for option, (value, _) in BAD.items()}
    for option, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        value, named = BAD[option]
        assert proc.returncode == 2, err
        message = err.strip().splitlines()[-1]
        assert f"{option}: {value} is not one of" in message and named in message
