"""The estimate's tables for docs/reports/GPU.md (Sec. 7) and README.md, from its JSON alone.

GiB are 2 ** 30 bytes, shown with two decimals; every figure is labelled estimated.
"""

from __future__ import annotations

from typing import Any

from lab.benchmarks.layouts import LAYOUT_NAMES
from lab.benchmarks.roofline.table import gpu_section
from lab.benchmarks.roofline.table import load as load_roofline

from .explain import h100_section, method, readme_table

__all__ = ["CACHE_NAMES", "gpu_block", "readme_block", "roofline_block"]

GIB = 2 ** 30
CACHE_NAMES = {"none": "", "ml-cache": " + ML-Cache"}


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f}"


def _columns(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(case key without the layout, its column title), sizes then batches then caches."""
    return [(f"{px}/{b}/{c}", f"{px} px B={b}{CACHE_NAMES[c]}")
            for px in doc["sizes"] for b in doc["batches"] for c in doc["caches"]]


def layout_table(doc: dict[str, Any]) -> str:
    """Peak allocated / reserved GiB of the pipeline, per layout and case."""
    cols = _columns(doc)
    lines = ["| layout | weights | " + " | ".join(t for _, t in cols) + " |",
             "|---" * (len(cols) + 2) + "|"]
    for layout, row in doc["layouts"].items():
        cells = [f"{gib(row['cases'][k]['peak_allocated'])} / "
                 f"{gib(row['cases'][k]['peak_reserved'])}" for k, _ in cols]
        lines.append(f"| {LAYOUT_NAMES[layout]} | {gib(row['weights_bytes'])} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def node_table(doc: dict[str, Any]) -> str:
    """Peak reserved GiB of the node path (sampling with the VQ resident, then the decode)."""
    cols = _columns(doc)
    lines = ["| layout | " + " | ".join(t for _, t in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for layout in doc["layouts"]:
        cells = [f"{gib(doc['cards'][f'{layout}/{k}']['peak_reserved'])} "
                 f"({gib(doc['cards'][f'{layout}/{k}']['beside_reserved'])})" for k, _ in cols]
        lines.append(f"| {LAYOUT_NAMES[layout]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _card(gb: int | None) -> str:
    return "> 24 GB" if gb is None else f"{gb} GB"


def card_table(doc: dict[str, Any]) -> str:
    """The smallest of 8 / 12 / 16 / 24 GB that holds each node-path case."""
    cols = _columns(doc)
    lines = ["| layout | " + " | ".join(t for _, t in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for layout in doc["layouts"]:
        entry = [doc["cards"][f"{layout}/{k}"] for k, _ in cols]
        cells = [_card(e["card_gb"]) + ("" if e["card_gb_beside"] == e["card_gb"]
                                        else f" ({_card(e['card_gb_beside'])})") for e in entry]
        lines.append(f"| {LAYOUT_NAMES[layout]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def vq_table(doc: dict[str, Any]) -> str:
    vq = doc["vq"]
    lines = ["| decode | peak allocated / reserved (VQ alone) | FLOPs |", "|---|---|---|"]
    for key, d in vq["decode"].items():
        px, b = key.split("/")
        lines.append(f"| {px} px, B={b} | {gib(d['peak_allocated'] - vq['base_allocated'])} / "
                     f"{gib(d['peak_reserved'] - vq['base_reserved'])} GiB | "
                     f"{d['flops'] / 1e12:.1f} TFLOP |")
    return "\n".join(lines)


def flops_table(doc: dict[str, Any]) -> str:
    """FLOPs of one full and one cached call (bf16; every layout counts the same products)."""
    lines = ["| size, batch | real tokens | full call | cached call |", "|---|---|---|---|"]
    cases = doc["layouts"]["bf16"]["cases"]
    for px in doc["sizes"]:
        for b in doc["batches"]:
            plain, cached = cases.get(f"{px}/{b}/none"), cases.get(f"{px}/{b}/ml-cache")
            full = plain["steps"][-1]["flops"] / 1e12 if plain else None
            part = next((s["flops"] for s in cached["steps"] if s["kind"] == "cached"), None) \
                if cached else None
            tokens = (plain or cached)["real_tokens"]
            lines.append(f"| {px} px, B={b} | {tokens} | "
                         f"{'-' if full is None else f'{full:.1f} TFLOP'} | "
                         f"{'-' if part is None else f'{part / 1e12:.1f} TFLOP'} |")
    return "\n".join(lines)


def floor_table(doc: dict[str, Any]) -> str:
    """FLOPs per 1024 px image and the floor on one H100, per strategy."""
    comp = doc["compute"]
    lines = ["| strategy | mean NFE | full-call equivalents | PFLOP per image | floor on one "
             "H100 | source |", "|---|---|---|---|---|---|"]
    for label, s in comp["strategies"].items():
        eq, pf, fl = f"{s['equivalents']:.2f}", f"{s['flops'] / 1e15:.2f}", f"{s['floor_s']:.2f} s"
        if "equivalents_high" in s:
            eq += f"-{s['equivalents_high']:.2f}"
            pf += f"-{s['flops_high'] / 1e15:.2f}"
            fl = f"{s['floor_s']:.2f}-{s['floor_high_s']:.2f} s"
        source = s["file"] or f"schedule: {s['refresh_calls']} refreshes, {s['cached_calls']} " \
                              "cached calls"
        lines.append(f"| `{label}` | {s['nfe_mean']:.2f} | {eq} | {pf} | {fl} | {source} |")
    return "\n".join(lines)


def gpu_block(doc: dict[str, Any]) -> str:
    """Everything between GPU.md's gpu_estimate markers."""
    parts = [method(doc), "### 7.1 Peak memory per weight layout (pipeline)",
             _layout_intro(doc), layout_table(doc)]
    if doc.get("vq"):
        parts += ["### 7.2 The node path: VQ decode, and which card fits", _vq_intro(doc),
                  vq_table(doc), _node_intro(), node_table(doc),
                  _card_intro(doc), card_table(doc)]
    parts += ["### 7.3 FLOPs per call and the compute floor per image", flops_table(doc)]
    if doc.get("compute"):
        parts += [_floor_intro(doc), floor_table(doc)]
    if doc.get("h100"):
        parts += ["### 7.4 Against the four H100 figures", h100_section(doc)]
    return "\n\n".join(parts) + "\n"


def _layout_intro(doc: dict[str, Any]) -> str:
    return ("**Estimated.** Peak allocated / reserved GiB while sampling (weights, the 32 MiB "
            "cuBLAS workspace and the sampler's state included): two steps without a cache, "
            "four with the lean ML-Cache (a refresh every other call). 'weights': the layout's "
            "device-resident weight bytes (for streaming: embedding, head and the two block "
            "slots).")


def _vq_intro(doc: dict[str, Any]) -> str:
    vq = doc["vq"]
    return (f"**Estimated.** The VQ-VAE, {vq['source']}: {vq['params'] / 1e6:.1f} M parameters, "
            f"{gib(vq['weights_bytes'])} GiB in float32. DiMOO VQ Decode decodes one image at a "
            "time in float32 (`decode_codes`), so a batch's decode peaks as one image's:")


def _node_intro() -> str:
    return ("Node path, peak reserved GiB: the larger of sampling with the VQ loaded and the VQ "
            "decode of one image at a time; in brackets, the decode beside the transformer's "
            "resident weights (a host that does not offload them for the decode).")


def _card_intro(doc: dict[str, Any]) -> str:
    return (f"**Which card fits (estimated).** The smallest of "
            f"{', '.join(map(str, doc['cards_gb']))} GB cards whose nominal size, less "
            f"{doc['headroom_gib']:.1f} GiB for what PyTorch's allocator does not see (the CUDA "
            "context, about 0.3-0.6 GiB, cuDNN's workspaces, a desktop's display), holds the "
            "node path's peak reserved bytes; '> 24 GB' when none does; in brackets where it "
            "differs, the card needed when the transformer stays resident during the decode "
            "(cards.py).")


def _floor_intro(doc: dict[str, Any]) -> str:
    comp = doc["compute"]
    return (f"**Estimated.** A full call at 1024 px, B=1 is {comp['full_call_flops'] / 1e12:.1f} "
            f"TFLOP, a cached call {comp['cached_call_flops'] / 1e12:.1f} TFLOP. Floor = FLOPs "
            f"per image / {comp['peak_flops'] / 1e12:.0f} TFLOPS (the H100 SXM's dense bf16 "
            "tensor-core peak); a forward (NFE) is one denoiser call, both CFG branches packed "
            "into one pass (the official code's 64 steps x 2 branches are the same products). "
            "Mean NFE from DiMOO-nano's 490 test prompts; with an ML-Cache a range (compute.py): "
            "nano's full-call equivalents to the fewest refreshes its schedule allows."
            + _measured(doc))


def _measured(doc: dict[str, Any]) -> str:
    """The H100's measured seconds per image (older code) against the floor, where known."""
    run, floors = (doc.get("h100") or {}).get("run", {}), doc["compute"]["strategies"]
    pairs = [(name, label) for name, label in (("baseline-64", "baseline-64"),
                                               ("mlcache", "baseline-64+mlcache-official"))
             if name in run.get("per_image_s", {}) and label in floors]
    if not pairs:
        return ""
    said = [f"`{label}` took {run['per_image_s'][name]:.2f} s per image, "
            f"{run['per_image_s'][name] / floors[label]['floor_s']:.1f}x its floor"
            for name, label in pairs]
    return f" Measured on the H100, on older code (Sec. 6.1): {'; '.join(said)}."


def readme_block(doc: dict[str, Any]) -> str:
    """README's short 'Does it fit my card?' table: per card, what fits at 1024 px."""
    return readme_table(doc)


def roofline_block(doc: dict[str, Any]) -> str:  # noqa: ARG001 (its own results file)
    """GPU.md's time per card, from lab/results/roofline.json (lab/benchmarks/roofline)."""
    roof = load_roofline()
    if roof is None:
        return ("**Pending.** No `lab/results/roofline.json`: run "
                "`python -m lab.benchmarks.roofline`.\n")
    return gpu_section(roof)
