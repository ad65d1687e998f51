"""``python -m lab.benchmarks.gpu_check``: every GPU path checked and every GPU figure measured, in
one command that fits a short GPU slot (docs/reports/GPU.md says what each section does).

    a  correctness   the device against the CPU in float32 (correctness.py)
    b  speed         ms per call and peak memory per weight layout, 8B shape (speed.py)
    c  per_image     seconds per image and rolling batches, 8B shape (per_image.py)
    d  calibration   a calibration's cost at 512 px, 16 prompts (calibration.py)

Options: ``--budget-minutes`` (default 9: one H100, the model builds included); ``--json PATH``
(default gpu_check_<device>.json under $OUT when that variable is set, as a lent GPU machine
sets it to the folder it returns, else under lab/results/); ``--sections a,b,...``;
``--device cuda|cpu``; ``--smoke`` (tiny shapes on any device, no timing claims: what CI runs);
``--docs`` (only rewrite the generated parts of the documents from the committed JSON, or the
one ``--json`` names; with ``--check``: exit 1 when they differ, writing nothing);
``--vq-config PATH`` (a Lumina-DiMOO vqvae/config.json, for the VQ decode row). A bad option,
or packages the run needs and cannot import (PACKAGES, all named at once), is one line naming
it and the fix, exit status 2, before anything runs. Each section is timed and written to the
JSON as it ends; a section the budget cannot fit is listed as not measured, and one that
overruns the budget by GRACE_S is stopped (recorded as an error); section b's compiled shapes,
optional, run last in what is left and, stopped by the budget itself, are recorded as not
measured (out of time), not as an error. A full GPU run rewrites the documents' generated parts
(docs.py). Every failure, a section that raised or a check or layout inside one that failed or
raised, is listed in the JSON's ``failures`` with its section, case and error (failures.py);
exit status 1 when there is any.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lab.benchmarks.common import RESULTS_DIR, _json_safe, device_slug, env_info

from .budget import PRIOR_S, SECTIONS, Clock, estimates, probe
from .failures import failures
from .render import COMMAND

__all__ = ["NAMES", "PACKAGES", "main", "missing_packages", "parse"]

NAMES = {"a": "correctness", "b": "speed", "c": "per_image", "d": "calibration"}
GRACE_S = 20.0  # past the budget by this much, the running section is stopped
#: what the sections import beyond torch: the weights and tokenizers of the checkpoints, the
#: calibration's statistics, tests/core/test_gpu.py (checked before any section runs)
PACKAGES = ("numpy", "safetensors", "tokenizers", "pytest")
OUT_OF_TIME = "not measured: out of time (optional; the budget ran out before it finished)"


class OverBudget(BaseException):
    """Raised by the alarm when a section overruns the budget by GRACE_S (a BaseException, so
    no ``except Exception`` inside a section keeps it running)."""


def _arm(seconds: float) -> None:
    """Raise OverBudget in ``seconds``, at once when none is left (``seconds <= 0``); where there
    is no SIGALRM only the at-once case is caught. ``_disarm()`` cancels it."""
    import signal

    if seconds <= 0:
        _disarm()
        raise OverBudget
    if not hasattr(signal, "setitimer"):
        return

    def stop(signum: int, frame: Any) -> None:
        raise OverBudget

    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm() -> None:
    """Cancel the alarm ``_arm`` set (a no-op where there is none)."""
    import signal

    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0.0)


def _within(seconds: float, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()``, stopped by OverBudget after ``seconds`` (at once when none is left); the
    alarm is off when this returns or raises, so it never fires outside the caller's try."""
    try:
        _arm(seconds)
        return work()
    finally:
        _disarm()


def _fail(message: str) -> None:
    print(f"gpu_check: {message}", file=sys.stderr)
    raise SystemExit(2)


def _sections(text: str) -> list[str]:
    by_name = {v: k for k, v in NAMES.items()}
    chosen = []
    for part in (p.strip() for p in text.split(",")):
        key = by_name.get(part, part)
        if key not in NAMES:
            _fail(f"--sections: {part!r} is not a section; give a comma-separated list of "
                  + ", ".join(f"{k} ({v})" for k, v in NAMES.items()))
        chosen.append(key)
    return [s for s in SECTIONS if s in chosen]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m lab.benchmarks.gpu_check",
                                 description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--budget-minutes", type=float, default=9.0,
                    help="the run's time budget (default 9: one H100, the model builds included)")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH",
                    help="where the results go (default: gpu_check_<device>[_smoke].json in $OUT "
                    "when that environment variable is set, as a lent GPU machine sets it to the "
                    "folder it returns; else in lab/results/); with --docs, the run to "
                    "render (default: the newest committed one)")
    ap.add_argument("--sections", default="a,b,c,d",
                    help="a comma-separated list of " + ", ".join(
                        f"{k} ({v})" for k, v in NAMES.items()) + " (default: all)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --smoke)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny shapes on any device, no timing claims (what CI runs)")
    ap.add_argument("--docs", action="store_true",
                    help="only rewrite the documents' generated parts from the JSON")
    ap.add_argument("--check", action="store_true",
                    help="with --docs: exit 1 when they differ, writing nothing")
    ap.add_argument("--vq-config", type=Path, default=None, metavar="PATH",
                    help="a Lumina-DiMOO vqvae/config.json, for the VQ decode row")
    return ap


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, each checked before any work (module docstring); exits 2 on a bad one."""
    args = _parser().parse_args(argv)
    args.sections = _sections(args.sections)
    if args.check and not args.docs:
        _fail("--check: only with --docs (is every generated part as the JSON says?)")
    if args.docs:
        return args
    if args.device not in ("cuda", "cpu"):
        _fail(f"--device {args.device!r}: give cuda (a GPU run) or cpu (with --smoke)")
    if args.device == "cuda" and not torch.cuda.is_available():
        _fail(f"--device cuda: torch {torch.__version__} sees no CUDA GPU here; run it on a GPU "
              "machine, or use --smoke --device cpu")
    if args.device == "cpu" and not args.smoke:
        _fail("--device cpu: the checks and figures need a GPU; add --smoke for the CPU run on "
              "tiny shapes (no timing claims)")
    kind = "cpu" if args.smoke and args.device == "cpu" else "cuda"
    smallest = min(args.sections, key=lambda s: PRIOR_S[kind][s])
    need = PRIOR_S[kind][smallest]
    if not (math.isfinite(args.budget_minutes) and args.budget_minutes * 60 >= need):
        _fail(f"--budget-minutes {args.budget_minutes:g}: below the smallest selected section "
              f"({smallest} {NAMES[smallest]}, about {need / 60:.2g} min"
              f"{' on a small CPU' if kind == 'cpu' else ' on one H100'}); give at least "
              f"{math.ceil(need / 60)}")
    if args.vq_config is not None and not args.vq_config.is_file():
        _fail(f"--vq-config {args.vq_config}: no such file; give a Lumina-DiMOO "
              "vqvae/config.json or leave the option out")
    missing = missing_packages(args.sections, args.device)
    if missing:
        _fail(f"missing package(s) {', '.join(missing)}: the run needs them; install them "
              f"(pip install {' '.join(missing)}) and run it again")
    return args


def missing_packages(sections: list[str], device: str) -> list[str]:
    """The packages of PACKAGES the selected sections need that this Python cannot import
    (pytest only for tests/core/test_gpu.py: section a on CUDA)."""
    import importlib.util

    need = [p for p in PACKAGES if p != "pytest" or ("a" in sections and device == "cuda")]
    return [p for p in need if importlib.util.find_spec(p) is None]


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None


def default_json(device: torch.device, smoke: bool) -> Path:
    """gpu_check_<device>[_smoke].json in $OUT when it is set (a lent GPU machine returns only
    that folder), else in lab/results/."""
    folder = Path(os.environ["OUT"]) if os.environ.get("OUT") else RESULTS_DIR
    return folder / f"gpu_check_{device_slug(device)}{'_smoke' if smoke else ''}.json"


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_json_safe(doc), indent=1) + "\n")
    tmp.replace(path)


def _run_section(key: str, device: torch.device, smoke: bool, left: Any,
                 est: dict[str, Any], chosen: list[str], vq_config: Path | None) -> dict[str, Any]:
    from .calibration import section_d
    from .correctness import section_a
    from .per_image import section_c
    from .speed import section_b

    later = sum(est[s] for s in chosen if s > key)
    deadline = lambda: left() - later  # noqa: E731 - seconds this section may still use
    if key == "a":
        return section_a(device, smoke, deadline)
    if key == "b":
        return section_b(device, smoke, deadline, est["layout_s"], vq_config)
    if key == "c":
        return section_c(device, smoke, deadline, est["rolling_mode_s"])
    return section_d(device, smoke, deadline)


def _compiled(device: torch.device, smoke: bool, clock: Clock, est: dict[str, Any]
              ) -> dict[str, Any]:
    """Section b's compiled shapes, last, in the time left (speed.compiled_section), stopped at
    the budget itself (optional work: no grace). Out of time, before or during a compile, they
    are skipped (not measured), not failed; an exception is an error."""
    from . import speed

    start, measured = time.perf_counter(), {}
    try:
        out = _within(clock.left(), lambda: speed.compiled_section(
            device, smoke, clock.left, est["compile_s"], measured))
    except OverBudget:
        out = {**measured, "status": OUT_OF_TIME}  # the shapes measured before it stopped
    if out.get("status") == OUT_OF_TIME:
        speed.release(device)  # the stopped compile's model (its frames are gone by now)
    out["seconds"] = time.perf_counter() - start
    return out


def _docs(args: argparse.Namespace) -> int:
    """``--docs``: rewrite (or with ``--check``, compare) the documents' generated parts."""
    from .docs import update_docs

    stale = update_docs(args.json, write=not args.check)
    for file in stale:
        print(f"gpu_check: {'stale' if args.check else 'rewrote'}: the generated parts of "
              f"{file}" + (f" (run {COMMAND} --docs)" if args.check else ""))
    return 1 if args.check and stale else 0


def _start(args: argparse.Namespace, clock: Clock, device: torch.device
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON's header, the probe and the estimates each section is planned with."""
    kind = "cpu" if device.type == "cpu" else "cuda"
    env = env_info()
    doc: dict[str, Any] = {
        "benchmark": "gpu_check", "env": env, "device": device_slug(device),
        "device_name": torch.cuda.get_device_name(device) if kind == "cuda" else "cpu",
        "driver": _driver() if kind == "cuda" else None, "cuda": torch.version.cuda,
        "torch": torch.__version__, "commit": env["git_commit"], "smoke": args.smoke,
        "budget_s": clock.budget_s, "sections": {}}
    print(f"gpu_check: {doc['device_name']}, torch {torch.__version__}, budget "
          f"{clock.budget_s:.0f} s, sections {','.join(args.sections)}", flush=True)
    try:
        doc["probe"] = probe(device, args.smoke)
        est = estimates(doc["probe"], kind, args.smoke)
    except Exception as exc:  # noqa: BLE001 - plan with the written-down estimates instead
        doc["probe"] = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        est = {**PRIOR_S[kind], "layout_s": 30.0, "compile_s": 90.0, "rolling_mode_s": 20.0}
    doc["estimates_s"] = est
    doc["probe"]["seconds"] = clock.elapsed()
    return doc, est


def _section(key: str, args: argparse.Namespace, clock: Clock, device: torch.device,
             est: dict[str, Any]) -> dict[str, Any]:
    """One section's entry: skipped when not selected or when its estimate does not fit the
    time left; else run, stopped GRACE_S past the budget, an exception recorded as an error."""
    entry: dict[str, Any] = {"name": NAMES[key], "estimate_s": est[key]}
    if key not in args.sections:
        return {**entry, "status": "not selected (--sections)"}
    if est[key] > clock.left():
        entry["status"] = (f"not measured: budget (estimated {est[key]:.0f} s, "
                           f"{clock.left():.0f} s left)")
        print(f"gpu_check: {key} {NAMES[key]}: {entry['status']}", flush=True)
        return entry
    start = time.perf_counter()
    print(f"gpu_check: {key} {NAMES[key]} (estimated {est[key]:.0f} s)", flush=True)
    try:
        entry.update(_within(clock.left() + GRACE_S, lambda: _run_section(
            key, device, args.smoke, clock.left, est, args.sections, args.vq_config)))
        entry["status"] = "measured"
    except OverBudget:
        entry.update({"status": "error", "error": f"stopped: over the budget by {GRACE_S:.0f} s",
                      "traceback": traceback.format_exc()[-3000:]})
    except Exception as exc:  # noqa: BLE001 - recorded; the other sections still run
        entry.update({"status": "error", "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc()[-3000:]})
    entry["seconds"] = time.perf_counter() - start
    print(f"gpu_check: {key} {NAMES[key]}: {entry['status']} in {entry['seconds']:.0f} s",
          flush=True)
    return entry


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.docs:
        return _docs(args)
    clock = Clock(args.budget_minutes * 60)
    device = torch.device(args.device)
    path = args.json or default_json(device, args.smoke)
    doc, est = _start(args, clock, device)
    for key in SECTIONS:
        doc["sections"][key] = _section(key, args, clock, device, est)
        if key in args.sections:
            doc["seconds"] = clock.elapsed()
            _write(path, doc)
    b = doc["sections"]["b"]
    if b.get("status") == "measured":
        b["compiled"] = _compiled(device, args.smoke, clock, est)
        print(f"gpu_check: b compiled: {b['compiled'].get('seconds', 0):.0f} s", flush=True)
    doc["failures"] = failures(doc)
    doc["seconds"] = clock.elapsed()
    _write(path, doc)
    print(f"gpu_check: wrote {path} ({doc['seconds']:.0f} s)", flush=True)
    if device.type == "cuda" and not args.smoke and os.environ.get("GPU_CHECK_NO_DOCS") != "1":
        from .docs import update_docs

        try:
            update_docs(path)
        except (OSError, ValueError) as exc:  # the JSON is written; --docs redoes this
            print(f"gpu_check: the documents were not rewritten ({exc})", flush=True)
    for f in doc["failures"]:
        print(f"gpu_check: FAILED {f['section']} {NAMES[f['section']]}"
              f"{' ' + f['case'] if f['case'] else ''}: {f['error'][:300]}", flush=True)
    if doc["failures"]:
        print(f"gpu_check: {len(doc['failures'])} failed check(s) or section error(s): see "
              f"{path} (failures)", flush=True)
    return 1 if doc["failures"] else 0
