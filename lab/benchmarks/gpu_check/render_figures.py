"""The generated blocks of sections b, c and d, the older H100 figures, and the short forms in
docs/USAGE.md, docs/reports/SELF_SCORE.md and README.md (render.py dispatches)."""

from __future__ import annotations

from typing import Any

from .projection import projected_seconds

__all__ = ["calibration", "older_block", "per_image", "readme", "self_score", "speed",
           "usage_memory"]

LAYOUT_NAMES = {"bf16": "bf16", "fp8": "fp8 storage (per-channel scales)",
                "low_vram": "bf16, blocks streamed from the CPU", "comfy_fp8": "ComfyUI fp8",
                "int8": "ComfyUI int8", "q8_0": "GGUF Q8_0", "q4_k_m": "GGUF Q4_K_M"}
PREVIOUS_KEYS = {"bf16": "bf16", "fp8": "fp8", "low_vram": "low_vram"}
#: the older run measured the ML-Cache peak the same way (lean cache, 4 steps), for bf16 only
PREVIOUS_CACHE_KEYS = {"bf16": "bf16+ML-Cache"}


def _f(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ms(row: dict[str, Any], px: str, kind: str) -> str:
    try:
        return _f(row["eager"][px][kind]["ms"])
    except (KeyError, TypeError):
        return "-"


# ------------------------------------------------------------------------------ section b
def speed(b: dict[str, Any] | None, where: str | None, pending: str, older: dict[str, Any]
          ) -> str:
    if b is None:
        old = older["doc"]["memory"]
        return (pending + "On the 8B-shaped model (bf16 compute, random weights), at 1024 and "
                "512 px: ms per full call and per cached call (official ML-Cache), eager for "
                "every weight layout (" + "; ".join(LAYOUT_NAMES.values()) + ") and compiled "
                "for bf16; peak memory per layout at 1024 px, with and without a lean ML-Cache. "
                "The last peaks, to compare with ("
                + older["label"] + "): " + ", ".join(
                    f"{_f(old[k]['peak_gib'])} GiB {n}" for k, n in
                    (("bf16", "bf16"), ("ml_cache", "bf16 + ML-Cache"), ("fp8", "fp8"),
                     ("low_vram", "streamed"))) + ".\n")
    big, small = (str(s) for s in b["sizes"])
    prev = b.get("previous", {}).get("peak_gib", {})
    rows = [f"Sizes {big} and {small} px, compute {b['dtype']}, prompt \"{b['prompt']}\" "
            f"(`{where}`, section b). Last peak: {b.get('previous', {}).get('file')} (commit "
            f"{b.get('previous', {}).get('commit')}, older code).", "",
            f"| layout | resident GiB | peak GiB | last | peak + ML-Cache GiB | last | ms full "
            f"{big} | ms cached {big} | ms full {small} | ms cached {small} |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for key, row in b["layouts"].items():
        name = LAYOUT_NAMES.get(key, key)
        if row.get("status") != "measured":
            rows.append(f"| {name} | {row.get('status')} {row.get('error', '')[:80]} |"
                        + " |" * 8)
            continue
        last = prev.get(PREVIOUS_KEYS.get(key, ""))
        last_cache = prev.get(PREVIOUS_CACHE_KEYS.get(key, ""))
        rows.append(f"| {name} | {_f(row.get('resident_gib'), 2)} | **{_f(row['peak_gib'], 2)}**"
                    f" | {_f(last, 2)} | {_f(row['peak_ml_cache_gib'], 2)} | {_f(last_cache, 2)} "
                    f"| {_ms(row, big, 'full')} | {_ms(row, big, 'cached')} "
                    f"| {_ms(row, small, 'full')} | {_ms(row, small, 'cached')} |")
    comp = b.get("compiled", {})
    cells = []
    for key in (f"{big}/full", f"{big}/cached", f"{small}/full", f"{small}/cached"):
        c = comp.get(key, {})
        cells.append(f"{_f(c['ms'])} (compile {c['compile_s']:.0f} s)"
                     if c.get("status") == "measured"
                     else c.get("status", comp.get("status", "-")))
    rows.append(f"| bf16, `pipe.compile()` ({comp.get('backend', '?')}) | | | | | | "
                + " | ".join(cells) + " |")
    bf16 = b["layouts"].get("bf16", {})
    if "tflops_full" in bf16:
        rows.append(f"\nbf16 full call at {big} px: {bf16['tflops_full']:.0f} TFLOP/s counting "
                    "2 x parameters x real tokens.")
    rows.append("Target: no peak above its last figure unless the reason is given under this "
                "table (the MLP's in-place product should lower them).")
    rows.append(f"VQ decode at {big} px: " + (
        f"{b['vq_decode']['ms']:.1f} ms" if b["vq_decode"].get("status") == "measured"
        else b["vq_decode"].get("status", "-")) + ".")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------ section c
def per_image(c: dict[str, Any] | None, where: str | None, pending: str,
              nfe: dict[str, Any]) -> str:
    if c is None:
        return (pending + "At 1024 px, side by side in one run: the official sampler at 64 "
                "steps and the official ML-Cache (measured), LADR `nano` and LADR `nano` + "
                "ML-Cache `ladr` (replayed to stop after their mean NFE on DiMOO-nano's test "
                f"set, {nfe['ladr-nano']:.2f} and {nfe['ladr-nano+mlcache']:.2f} "
                f"({nfe['file']}); seconds per image projected as mean NFE x the replay's ms "
                "per call); images per second of rolling batches at 512 px with 1, 2, 4 and 8 "
                "in flight.\n")
    src = c["source"]
    rows = [f"{c['size']} px, {c['dtype']} (`{where}`, section c); mean NFE from "
            f"{src['file']}: LADR `nano` {src['ladr-nano']:.2f}, with ML-Cache `ladr` "
            f"{src['ladr-nano+mlcache']:.2f} ({src['prompts']} test prompts).", "",
            "| case | calls | ms per call | seconds per image | how |", "|---|---|---|---|---|"]
    for r in c["per_image"]:
        if r["how"] == "projected":
            sec = projected_seconds(r["mean_nfe"], r["ms_per_call"])
            how = f"projected: {r['mean_nfe']:.2f} x {r['ms_per_call']:.1f} ms"
        else:
            sec, how = r["seconds_per_image"], "measured"
        rows.append(f"| {r['case']} | {r['calls']} | {r['ms_per_call']:.1f} | **{sec:.2f}** "
                    f"| {how} |")
    both = next((r for r in c["per_image"] if "token_forwards_vs_ladr" in r), None)
    if both:
        rows.append(f"\nThe replayed LADR + ML-Cache run pushed {both['token_forwards_vs_ladr']:.2f}x "
                    "the token-forwards of LADR alone (on nano: "
                    f"{both['nano_token_forwards_vs_ladr']:.2f}x): the replay's cache work "
                    "stands in for the real run's.")
    rows += ["", f"Rolling batches, {c['rolling_size']} px, 8 prompts, each replaying its own "
             f"NFE ({c['rolling_finish_nfe']}):", "",
             "| in flight | images per second | vs 1 in flight | calls |", "|---|---|---|---|"]
    for r in c["rolling"]:
        if r.get("status") != "measured":
            rows.append(f"| {r['in_flight']} | {r.get('status')} | | |")
            continue
        rows.append(f"| {r['in_flight']} | {r['images_per_s']:.2f} | "
                    f"{r.get('speed_vs_1', 1.0):.2f}x | {r['calls']} |")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------ section d
def calibration(d: dict[str, Any] | None, where: str | None, pending: str,
                calls: dict[str, Any]) -> str:
    head = (f"A full calibration (64 steps, the default candidates) makes "
            f"**{calls['calls_per_image']:.1f} denoiser calls per image**: the reference's "
            f"{calls['reference']}, the candidates' NFE on DiMOO-nano's validation prompts "
            f"({sum(calls['candidates_nfe'].values()):.1f}, {calls['file']}"
            f"{'; ' + calls['sweep'] if calls.get('sweep') else ''}), the official "
            f"sampler at {calls['matched_baselines']} ({sum(calls['matched_baselines'])}) and "
            f"{calls['self_score_passes']} self-score passes. ")
    if d is None:
        return (pending + head + "Its time at 512 px with 16 prompts is projected as those "
                "calls x 16 images x the ms per image-call of a short calibration (the "
                "reference and `nano` at T = 4, the calibration's own loop, batch 8).\n")
    short = d["short_run"]
    seconds = projected_seconds(d["full"]["calls_per_image"] * d["prompts"],
                                short["ms_per_image_call"])
    return (head + f"The short run (`{where}`, section d): {', '.join(short['settings'])} at "
            f"T = {short['steps']}, {d['prompts']} prompts at {d['size']} px, batch "
            f"{d['batch']}: {short['image_calls']} image-calls in {short['wall_s']:.1f} s, "
            f"{short['ms_per_image_call']:.1f} ms each. **Projected full calibration: "
            f"{seconds / 60:.1f} min** ({d['full']['calls_per_image']:.1f} x {d['prompts']} x "
            f"{short['ms_per_image_call']:.1f} ms), the model's loading aside.\n")


def self_score(d: dict[str, Any] | None, where: str | None, calls: dict[str, Any]) -> str:
    if d is None:
        return (f"**Pending.** A full calibration makes {calls['calls_per_image']:.1f} denoiser "
                "calls per image (the derivation: [GPU.md](GPU.md) Sec. 5); its ms per "
                "image-call at 512 px on a GPU is measured by `python -m lab.benchmarks.gpu_check` "
                "(section d), which then projects the 16-prompt calibration's time here.\n")
    seconds = projected_seconds(d["full"]["calls_per_image"] * d["prompts"],
                                d["short_run"]["ms_per_image_call"])
    return (f"**Projected: {seconds / 60:.1f} min** for {d['prompts']} prompts at {d['size']} "
            f"px: {d['full']['calls_per_image']:.1f} calls per image x {d['prompts']} images x "
            f"{d['short_run']['ms_per_image_call']:.1f} ms per image-call, measured by a short "
            f"calibration on the GPU (`{where}`; [GPU.md](GPU.md) Sec. 5).\n")


# -------------------------------------------------------------------------- older figures
def older_block(older: dict[str, Any], nfe: dict[str, Any]) -> str:
    doc = older["doc"]
    mem, step = doc["memory"], doc["step"]
    e2e = {r["case"]: r for r in doc["end_to_end"]}
    rows = [f"From `{older['file']}` ({doc['env']['gpu']}, torch {doc['env']['torch']}, "
            f"{older['label']}). Each is to be measured again by `python -m "
            "lab.benchmarks.gpu_check`.", "",
            "| figure | value |", "|---|---|"]
    for key, name in (("bf16", "peak, bf16"), ("ml_cache", "peak, bf16 + ML-Cache"),
                      ("fp8", "peak, fp8 storage"), ("low_vram", "peak, blocks streamed")):
        rows.append(f"| {name}, 1024 px | {mem[key]['peak_gib']:.2f} GiB |")
    rows.append(f"| one full call, 1024 px | {step['packed_ms']:.1f} ms |")
    rows.append(f"| one cached call (official ML-Cache) | {step['cached_call_ms']:.1f} ms |")
    for case, name in (("baseline-64", "official sampler, 64 steps"),
                       ("mlcache", "official ML-Cache")):
        rows.append(f"| {name}, per image | {e2e[case]['wall_s']:.2f} s (measured) |")
    ladr = e2e["ladr-nano"]
    sec = projected_seconds(nfe["ladr-nano"], ladr["ms_per_call"])
    rows.append(f"| LADR `nano`, per image | about {sec:.1f} s, projected: {nfe['ladr-nano']:.2f}"
                f" calls ({nfe['file']}) x {ladr['ms_per_call']:.1f} ms per call |")
    return "\n".join(rows) + "\n"


def usage_memory(b: dict[str, Any] | None, where: str | None, older: dict[str, Any]) -> str:
    head = ("| weights | peak at 1024 px | smallest card it fits |\n| --- | --- | --- |\n")
    if b is None:
        mem = older["doc"]["memory"]
        body = "".join(f"| {n} | {mem[k]['peak_gib']:.1f} GiB | {_card(mem[k]['peak_gib'])} |\n"
                       for k, n in (("bf16", "bf16"), ("ml_cache", "bf16 + ML-Cache"),
                                    ("fp8", "fp8 (`weight_dtype=\"fp8_e4m3fn\"`)"),
                                    ("low_vram", "bf16, blocks streamed from the CPU")))
        return (head + body + f"\nFrom an H100 with an 8B-shaped model with random weights "
                f"([reports/GPU.md](reports/GPU.md) Sec. 6), {older['label']}; "
                "pending a rerun (`python -m lab.benchmarks.gpu_check`). A card fits when its "
                "memory holds the peak plus 1 GiB for CUDA's context and the VQ decoder.\n")
    body = "".join(
        f"| {LAYOUT_NAMES.get(k, k)} | {r['peak_gib']:.1f} GiB (with a lean ML-Cache "
        f"{r['peak_ml_cache_gib']:.1f}) | {_card(r['peak_gib'])} |\n"
        for k, r in b["layouts"].items() if r.get("status") == "measured")
    return (head + body + f"\nMeasured on a GPU with an 8B-shaped model with random weights "
            f"(`{where}`, [reports/GPU.md](reports/GPU.md) Sec. 3). A card fits when its "
            "memory holds the peak plus 1 GiB for CUDA's context and the VQ decoder.\n")


def _card(peak_gib: float) -> str:
    for gb in (8, 12, 16, 20, 24, 32, 40, 48, 80):
        if gb * 1e9 / 2 ** 30 >= peak_gib + 1.0:
            return f"{gb} GB"
    return "more than 80 GB"


def readme(c: dict[str, Any] | None, where: str | None) -> str:
    if c is None:
        return ("GPU figures (time per image, memory per format) are pending a run of "
                "`python -m lab.benchmarks.gpu_check`: [docs/reports/GPU.md](docs/reports/GPU.md).\n")
    rows = {r["case"]: r for r in c["per_image"]}
    both = rows["ladr-nano+ml-cache-ladr"]
    base = next(r for k, r in rows.items() if k.startswith("baseline-"))
    sec = projected_seconds(both["mean_nfe"], both["ms_per_call"])
    return (f"On one GPU with an 8B-shaped model with random weights, 1024 px: LADR `nano` + "
            f"ML-Cache `ladr` about **{sec:.1f} s per image** (projected from nano's mean NFE), "
            f"the official sampler at {base['steps']} steps {base['seconds_per_image']:.1f} s "
            "(measured): "
            "[docs/reports/GPU.md](docs/reports/GPU.md).\n")
