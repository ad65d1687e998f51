"""Section a: correctness on the device against the CPU in float32 (cases.py, bounds.py), host
syncs per step counted (tests.kit.syncs: CUDA's own count on a GPU, the dispatch-level counter
elsewhere), the sampler alone under every strategy and preset, and tests/core/test_gpu.py.

Checkpoints: DiMOO-nano (shipped) and the tests' tiny random checkpoint in the official layout
(tests/kit/tiny_checkpoint.py, written without its VQ weights), both loaded model-only
(models.py). Tokens must be equal where float32 says they must (every case of cases.py: same
stored weights, greedy, the two runs differ only by float32 rounding); where a format rounds
they are bounded (bounds.py); a rolling batch on a GPU, whose kernels follow the pass's row
count, reports its agreement with its items' single runs on the device (``agreement``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ladr_core import nano_model_path, preset_names, resolve_strategy, sample, strategy_names
from tests.kit.fakes import varied_denoiser
from tests.kit.syncs import count_syncs, sampler_reads

from .bounds import bf16_rows, self_score_row, trajectory_states
from .cases import PROMPT, Case, build_cases
from .models import CodesPipeline, model_only, to_device

__all__ = ["agreement", "checkpoints", "run_case", "section_a"]

ROOT = Path(__file__).resolve().parents[3]


def checkpoints(smoke: bool, tmp: Path) -> dict[str, Path | str]:
    """name -> folder (or why it does not run): nano, and the tiny checkpoint written to tmp."""
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    tiny = write_tiny_checkpoint(tmp / "tiny", vq=False)
    nano: Path | str = nano_model_path()
    if smoke:
        nano = "not run in the smoke run (tiny checkpoint only)"
    return {"nano": nano, "tiny": tiny}


def _compare(want: Any, got: Any) -> dict[str, Any]:
    a, b = want.tokens.cpu(), got.tokens.cpu()
    same = a.shape == b.shape and torch.equal(a, b)
    out: dict[str, Any] = {"tokens_equal": bool(same), "item_nfe_cpu": list(want.item_nfe),
                           "item_nfe_device": list(got.item_nfe), "steps_run": got.steps}
    if not same and a.shape == b.shape:
        out["tokens_differ_share"] = float((a != b).float().mean())
    out["check"] = "passed" if same and out["item_nfe_cpu"] == out["item_nfe_device"] else "failed"
    return out


def agreement(got: Any, alone: list[Any]) -> dict[str, Any]:
    """How many items of a batch run ``got`` have the tokens of their own run ``alone[i]`` (each
    a one-item run on the same device): ``items_agree`` of ``items``, and their share."""
    rows = got.tokens.cpu()
    same = [bool(r.shape == a.tokens.cpu()[0].shape and torch.equal(r, a.tokens.cpu()[0]))
            for r, a in zip(rows, alone, strict=True)]
    return {"items": len(same), "items_agree": sum(same),
            "agreement": sum(same) / max(len(same), 1)}


def run_case(case: Case, ref: CodesPipeline, dev: CodesPipeline,
             device: torch.device) -> dict[str, Any]:
    """The case on the CPU and on the device; tokens compared; the device run's syncs."""
    row: dict[str, Any] = {"case": case.name, "steps": case.steps}
    if case.note:
        row["note"] = case.note
    if case.steps == 0:
        return {**row, "check": "not applicable"}
    start = time.perf_counter()
    try:
        want = case.reference() if case.reference else case.run(case.reference_pipe or ref)
        pipe = case.device_pipe() if case.device_pipe else dev
        case.run(pipe)  # warm-up: first kernels, compiles, the first sync count of a process
        out: list[Any] = []
        syncs, sites = count_syncs(lambda: out.append(case.run(pipe)), device)
        got = out[0]
        row.update(_compare(want, got))
        if case.singles:  # the batch against its items alone, both on the device
            row.update(agreement(got, [single(pipe) for single in case.singles]))
        if case.rounds:
            row["rounds"] = case.rounds
            if row["check"] == "failed":
                row["check"] = "reported"  # not required equal; bounded in bf16
        reads = sampler_reads(got.steps, case.steps)
        row.update({"syncs": syncs, "syncs_per_step": syncs / max(got.steps, 1),
                    "beyond_sampler_reads": syncs - reads, "sync_sites": sites,
                    "compile_s": getattr(got, "compile_seconds", 0.0)})
    except Exception as exc:  # noqa: BLE001 - a failing case is a finding; the run goes on
        row.update({"check": "error", "error": f"{type(exc).__name__}: {exc}"[:600]})
    row["seconds"] = time.perf_counter() - start
    return row


def sampler_syncs(device: torch.device, smoke: bool) -> list[dict[str, Any]]:
    """``sample()`` alone (a fake denoiser, no network) under every registered strategy and
    LADR preset, batch 1 and 2, temperature 1 and 0: host syncs per step (target <= 1)."""
    grid, k, steps = ((4, 4), 16, 6) if smoke else ((16, 16), 256, 16)
    names = [(s, None) for s in strategy_names()] + [("ladr", p) for p in preset_names()]
    rows = []
    for name, preset in names:
        for batch, temp in ((1, 1.0), (2, 1.0), (2, 0.0)):
            strategy = resolve_strategy(preset or name)
            denoise = varied_denoiser(batch, grid[0] * grid[1], k, device=device)
            gens = [torch.Generator(device=device).manual_seed(i) for i in range(batch)]
            out: list[Any] = []
            total, _ = count_syncs(lambda s=strategy, d=denoise, g=gens, b=batch, t=temp, o=out:
                                   o.append(sample(d, shape=(b, *grid), steps=steps, strategy=s,
                                                   temperature=t, generator=g,
                                                   callback=lambda r: None)), device)
            reads = sampler_reads(out[0].steps, steps)
            rows.append({"strategy": preset or name, "batch": batch, "temperature": temp,
                         "steps": out[0].steps, "syncs": total, "sampler_reads": reads,
                         "check": "passed" if total <= reads else "failed"})
    return rows


def gpu_tests(timeout: float) -> dict[str, Any]:
    """tests/core/test_gpu.py (CUDA only: graphs, top-2, syncs counted by CUDA)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/core/test_gpu.py"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"check": "error", "error": f"timed out after {timeout:.0f} s"}
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error)",
                                                proc.stdout)}
    ok = proc.returncode == 0 and counts.get("passed", 0) > 0
    return {"counts": counts, "returncode": proc.returncode, "check": "passed" if ok else "failed",
            "tail": proc.stdout[-1500:] if not ok else ""}


def checkpoint_rows(name: str, folder: Path, device: torch.device, cap: int | None,
                    backend: str) -> dict[str, Any]:
    """Every case, the bf16 bounds and the self-score for one checkpoint."""
    from ladr_core.calibrate import CALIBRATION_SELF_SCORE

    ref = model_only(folder)
    dev = ref.with_transformer(to_device(ref.transformer, device))
    rows = [run_case(c, ref, dev, device) for c in build_cases(ref, dev, device, cap, backend)]
    nano = resolve_strategy("nano")
    states = trajectory_states(ref, nano, cap or 64)
    tokens = ref.generate(PROMPT, steps=cap or 64, temperature=0.0, strategy="baseline",
                          decode=False).tokens
    return {"status": "measured", "folder": str(folder) if name == "nano" else "tiny",
            "cases": rows, "bf16_logits": bf16_rows(ref, device, states),
            "self_score": _safe(lambda: self_score_row(ref, dev, tokens,
                                                       CALIBRATION_SELF_SCORE))}


def section_a(device: torch.device, smoke: bool, deadline: Any) -> dict[str, Any]:
    """Every case on every checkpoint, the bounded checks, sampler syncs, the GPU tests."""
    out: dict[str, Any] = {"reference": "CPU, float32, greedy", "models": {}}
    if device.type == "cuda":  # float32 as float32: no TF32 in matmuls or convolutions
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        out["float32"] = {"matmul_allow_tf32": False, "matmul_precision": "highest"}
        count_syncs(lambda: torch.ones(1, device=device).sum().item(), device)  # CUDA's first
    cap = 6 if smoke else None
    backend = "inductor" if device.type == "cuda" else "eager"
    with tempfile.TemporaryDirectory() as tmp:
        for name, folder in checkpoints(smoke, Path(tmp)).items():
            if isinstance(folder, str):
                out["models"][name] = {"status": folder}
            elif deadline() <= 0:
                out["models"][name] = {"status": "not measured: budget"}
            else:
                out["models"][name] = _safe(lambda f=folder, n=name: checkpoint_rows(
                    n, f, device, cap, backend))
                out["models"][name].setdefault("status", "error")
            print(f"  a: {name}: {out['models'][name]['status']}", flush=True)
    out["sampler_syncs"] = sampler_syncs(device, smoke)
    out["gpu_tests"] = (gpu_tests(max(120.0, deadline())) if device.type == "cuda"
                        else {"check": "not run: needs CUDA"})
    out["summary"] = summarize(out)
    return out


def _safe(fn: Any) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return {"check": "error", "error": f"{type(exc).__name__}: {exc}"[:600]}


def summarize(a: dict[str, Any]) -> dict[str, int]:
    """How many checks passed, failed, errored (not applicable ones aside)."""
    checks = []
    for m in a["models"].values():
        if m.get("status") == "error":
            checks.append("error")
        checks += [r["check"] for r in m.get("cases", [])]
        checks += [r["check"] for r in m.get("bf16_logits", [])]
        if "self_score" in m:
            checks.append(m["self_score"]["check"])
    checks += [r["check"] for r in a.get("sampler_syncs", [])]
    if a.get("gpu_tests", {}).get("check") in ("passed", "failed", "error"):
        checks.append(a["gpu_tests"]["check"])
    return {k: checks.count(k) for k in ("passed", "failed", "error")}
