"""The whole estimate as one JSON document: every layout's cases (measure.py; the streamed
layout composed from bf16's, stream.py), the VQ decode (vqdecode.py), the comparison with the
H100 run (h100.py), the card table (cards.py) and the compute floor (compute.py)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import torch

from lab.benchmarks.common import REPO_ROOT, env_info
from tests.kit.cuda_emu import emulated_cuda

from . import cards, compute, h100
from .kernels import cuda_kernels
from .measure import CUBLAS_WORKSPACE, measure_layout, model_shape
from .stream import stream_parts, streamed_row

__all__ = ["estimate"]


def _dirty() -> list[str]:
    """Tracked files the working tree changed under ladr_core/, lab/ (the
    code this estimate ran, beyond the commit)."""
    proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                           "ladr_core", "lab"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False)
    return sorted(line[3:] for line in proc.stdout.splitlines() if line.strip())


def _extra(shape: str, sizes: list[int], batches: list[int]) -> Any:
    def extra(layout: str, model: Any, pipe: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if layout == "bf16":
            out["stream_parts"] = stream_parts(model)
        if shape == "8b" and 1024 in sizes and 1 in batches:
            again = h100.rerun(layout, pipe)
            if again is not None:
                out["h100"] = again
        return out
    return extra


def _layouts(shape: str, layouts: list[str], sizes: list[int], batches: list[int],
             caches: list[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    built = [lay for lay in layouts if lay != "low_vram"]
    if "low_vram" in layouts and "bf16" not in built:
        built.insert(0, "bf16")  # the streamed layout is composed from bf16's cases
    for layout in built:
        start = time.perf_counter()
        row = measure_layout(layout, shape, sizes, batches, caches, _extra(shape, sizes, batches))
        extra = row.pop("extra", {})
        row["h100"] = extra.get("h100", {})
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows[layout] = row
        if "stream_parts" in extra and "low_vram" in layouts:
            rows["low_vram"] = streamed_row(row, extra["stream_parts"])
            rows["low_vram"]["h100"] = streamed_row({**row, "cases": row["h100"]},
                                                    extra["stream_parts"])["cases"]
    return {lay: rows[lay] for lay in layouts}


def _vq(shape: str, sizes: list[int], batches: list[int]) -> dict[str, Any] | None:
    if shape != "8b":
        return None  # the tiny shape has no VQ of Lumina-DiMOO's size
    from .vqdecode import measure_vq

    return measure_vq(sizes, batches)


def _cards(doc: dict[str, Any]) -> dict[str, Any]:
    vq, out = doc["vq"], {}
    if vq is None:
        return out
    for layout, row in doc["layouts"].items():
        for key, case in row["cases"].items():
            px, batch, _ = key.split("/")
            peaks = cards.node_peaks(row, case, vq, int(px), int(batch))
            out[f"{layout}/{key}"] = {
                **peaks, "card_gb": cards.smallest_card(peaks["peak_reserved"]),
                "card_gb_beside": cards.smallest_card(peaks["beside_reserved"]),
                "pipeline_card_gb": cards.smallest_card(case["peak_reserved"])}
    return out


def _compute(doc: dict[str, Any], strategies: list[str]) -> dict[str, Any] | None:
    bf16 = doc["layouts"].get("bf16", {}).get("cases", {})
    plain, cached = bf16.get("1024/1/none"), bf16.get("1024/1/ml-cache")
    if doc["shape"] != "8b" or plain is None or cached is None:
        return None
    full = plain["steps"][-1]["flops"]
    cached_flops = next(s["flops"] for s in cached["steps"] if s["kind"] == "cached")
    share = plain["n_codes"] * len(plain["row_lengths"]) / plain["real_tokens"]
    return {"full_call_flops": full, "cached_call_flops": cached_flops,
            "peak_flops": compute.H100_BF16_DENSE, "code_share": share,
            "strategies": compute.floors(strategies, full, cached_flops, share)}


def estimate(shape: str, storage: str, layouts: list[str], sizes: list[int],
             batches: list[int], caches: list[str], strategies: list[str]) -> dict[str, Any]:
    env = env_info()
    config, _, dtype = model_shape(shape)
    doc: dict[str, Any] = {
        "benchmark": "gpu_estimate",
        "device": f"estimated: CUDA emulation with {storage} storage on {env['processor']}",
        "env": {**env, "dirty": _dirty()}, "shape": shape, "storage": storage,
        "config": config.to_dict(), "dtype": str(dtype).removeprefix("torch."),
        "sizes": sizes, "batches": batches, "caches": caches,
        "cublas_workspace_bytes": CUBLAS_WORKSPACE, "headroom_gib": cards.HEADROOM_GIB,
        "cards_gb": list(cards.CARDS_GB)}
    start = time.perf_counter()
    with emulated_cuda(storage=storage), cuda_kernels():
        workspace = torch.empty(CUBLAS_WORKSPACE, dtype=torch.uint8, device="cuda")
        doc["layouts"] = _layouts(shape, layouts, sizes, batches, caches)
        doc["vq"] = _vq(shape, sizes, batches)
        del workspace
    doc["seconds"] = round(time.perf_counter() - start, 1)
    doc["h100"] = {"run": h100.old_run(), "rows": h100.compare(doc["layouts"])} \
        if shape == "8b" else None
    doc["cards"] = _cards(doc)
    doc["compute"] = _compute(doc, strategies)
    return doc
