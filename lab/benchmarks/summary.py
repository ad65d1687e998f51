"""Turn the benchmark JSON files into the README's Performance table (figure, measured, target).

``summary_rows(results)`` takes ``{name: parsed JSON}`` for the scripts that ran and returns one
row per figure; ``to_markdown(rows)`` renders them. Used by ``lab.benchmarks.run_all``; run alone
(``python -m lab.benchmarks.summary``) it re-renders ``lab/results/*.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lab.benchmarks.common import RESULTS_DIR

Row = dict[str, Any]


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


def _row(figure: str, measured: str, target: str = "", met: bool | None = None) -> Row:
    return {"figure": figure, "measured": measured, "target": target,
            "met": "" if met is None else ("yes" if met else "**no**")}


def _sampler(doc: dict[str, Any]) -> list[Row]:
    rows = []
    target = doc.get("target_ratio", 2.0)
    for r in doc["rows"]:
        if "@T=" not in r["case"]:
            continue
        rows.append(_row(f"sampler overhead/step, {r['case']}, B={r['batch']} "
                         f"({doc['grid'][0]}x{doc['grid'][1]}, K={doc['codes']})",
                         f"{_ms(r['per_step_ms'])} = {r['paired_ratio']:.2f}x floor (paired; "
                         f"vs interleaved floor {r['ratio_to_floor']:.2f}x, minima "
                         f"{r['ratio_of_minima']:.2f}x)",
                         f"<= {target:g}x", r["paired_ratio"] <= target))
    floors = [r for r in doc["rows"] if r["case"].startswith(("floor", "ref:"))]
    for r in floors:
        rows.append(_row(f"  reference: {r['case']}, B={r['batch']}",
                         f"{_ms(r['per_step_ms'])} = {r['ratio_to_floor']:.2f}x floor"))
    return rows


def _syncs(doc: dict[str, Any]) -> list[Row]:
    rows = []
    for strategy in ("baseline", "ladr", "prophet"):
        cases = [r for r in doc["rows"] if r["strategy"] == strategy]
        worst = max(r["per_step"] for r in cases)
        rows.append(_row(f"host syncs/step in sample(), {strategy} (all temperatures, "
                         f"batches{', presets' if strategy == 'ladr' else ''})",
                         f"max {worst:.2f} over {len(cases)} cases", "<= 1", worst <= 1.0))
    for r in doc.get("pipeline_rows", []):
        cache = f" + ML-Cache ({r['ml_cache']})" if r["ml_cache"] else ""
        rows.append(_row(f"  host syncs, whole generate() on {r.get('model', 'nano')}, "
                         f"{r['strategy']}{cache}",
                         f"{r['total_syncs']} in {r['steps']} steps, {r['beyond_steps']} beyond "
                         "one per step", "<= 1 beyond", r["meets_target"]))
    return rows


def _native(doc: dict[str, Any]) -> list[Row]:
    c = doc["cfg_batched_vs_two_calls"]
    spec = doc["config"]
    shape = f"{spec['n_layers']}L x {spec['d_model']}d, {doc['tokens']} tok"
    rows = [_row(f"batched CFG (1 call of 2) vs 2 calls ({shape})",
                 f"{c['speed_ratio_two_calls_over_batched']:.2f}x faster, "
                 f"max diff {c['max_abs_diff']:.1e}", "equal logits", c["max_abs_diff"] < 1e-3)]
    off = doc.get("native_vs_official")
    if off:
        r = off["speed_ratio_official_over_native"]
        rows.append(_row(f"native vs official forward ({shape}, fp32)",
                         f"{r:.2f}x (official/native), max diff {off['max_abs_diff']:.1e}",
                         ">= 1.0, equal logits", r >= 1.0 and off["max_abs_diff"] < 1e-3))
    else:
        rows.append(_row("native vs official forward", "not run (needs --official DIR)"))
    return rows


def _mlcache(doc: dict[str, Any]) -> list[Row]:
    return [_row(f"token-forwards saved vs baseline, {r['case']} ({doc['model']}, "
                 f"T={r.get('steps', doc['steps'])})",
                 f"{r['saved_vs_baseline']:.1%} (NFE {r['nfe']}, "
                 f"{r['speedup_vs_baseline']:.2f}x time)")
            for r in doc["rows"] if r["case"] != "baseline"]


def _loader(doc: dict[str, Any]) -> list[Row]:
    gib = doc["weight_bytes"] / 2**30
    rows = [_row(f"loader peak RSS - baseline, {gib:.2f} GiB bf16 checkpoint",
                 f"{doc['ratio']:.3f}x weights", f"<= {doc['target_ratio']:g}x",
                 doc["meets_target"])]
    naive = doc["cases"].get("naive")
    if naive:
        rows.append(_row("  reference: naive load_file + load_state_dict",
                         f"{naive['ratio_to_weights']:.3f}x weights"))
    return rows


def _preview(doc: dict[str, Any]) -> list[Row]:
    return [_row(f"preview: {r['case']} at {r['size']}",
                 f"{_ms(r['ms'])} = {r['share']:.2%} of a step"
                 + (f", {r['host_syncs']} host syncs" if r.get("host_syncs") else ""),
                 f"<= {doc['target_share']:.0%}", r["meets_target"])
            for r in doc["rows"] if r["case"] != "sampling step"]


def _e2e(doc: dict[str, Any]) -> list[Row]:
    return [_row(f"end to end, {r['strategy']}, batch {r['batch']} ({doc['model']}, "
                 f"{doc['size']}px, T={doc['steps']})",
                 f"{r['images_per_s']:.2f} img/s, NFE {r['nfe']}, "
                 f"{r['speedup_vs_baseline']:.2f}x baseline")
            for r in doc["rows"]]


def _soak(doc: dict[str, Any]) -> list[Row]:
    flat = doc["live_tensors_min"] == doc["live_tensors_max"]
    return [_row(f"soak: {doc['gens']} generations ({doc['model']}, incl. interrupted runs)",
                 f"RSS median growth {doc['rss_growth_median'] / 2**20:+.1f} MB (last-first "
                 f"{doc['rss_growth'] / 2**20:+.1f} MB), live tensors "
                 f"{doc['live_tensors_min']}..{doc['live_tensors_max']}",
                 "no growth beyond noise", flat and doc["rss_growth_median"] < 16 * 2**20)]


BUILDERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "sampler_overhead": _sampler, "host_syncs": _syncs, "native_forward": _native,
    "ml_cache": _mlcache, "loader_memory": _loader, "preview_cost": _preview,
    "end_to_end": _e2e, "soak": _soak,
}


def summary_rows(results: dict[str, dict[str, Any]]) -> list[Row]:
    rows: list[Row] = []
    for name, build in BUILDERS.items():
        if name in results:
            try:
                rows += build(results[name])
            except (KeyError, TypeError, ValueError) as exc:
                rows.append(_row(f"{name}: result unreadable ({exc!r})", ""))
    return rows


def to_markdown(rows: list[Row]) -> str:
    lines = ["| Figure | Measured | Target | Met |", "|---|---|---|---|"]
    lines += [f"| {r['figure']} | {r['measured']} | {r['target']} | {r['met']} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS_DIR,
                    help="folder of the scripts' JSON files (default lab/results)")
    folder = ap.parse_args(argv).results
    docs = {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
    table = to_markdown(summary_rows(docs))
    print(table)
    return table


if __name__ == "__main__":
    main()
