"""The calibration command on DiMOO-nano, and what the nano evaluator says of its verdict.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.calibration_nano --prompts 6
    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.calibration_nano --prompts 48
    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.calibration_nano \
        --prompts-file lab/results/calibration_nano_six.txt

Runs ``python -m ladr_core.calibrate nano --prompts FILE`` (``ladr_core.calibrate.cli.main``,
one CPU thread) on the first ``--prompts`` lines of nano's built-in list
(``ladr_core/assets/dimoo_nano/calibration_prompts.txt``), or on the prompts of
``--prompts-file`` (six prompts where the rule before the spread floor recommended nano:
``calibration_nano_six.txt``), then writes
``lab/results/calibration_nano_<n or the file's stem>.json``: the command, its exit status and warnings,
every setting's NFE, token-forwards, self-score difference to the reference with its interval,
whether it qualifies, its spread and the prompts it would need, the denoiser calls the run made
(the cost the wall time follows), the recommendation and why; beside each setting, the nano
evaluator's paired difference to baseline-64 on the TEST set (the complete chunks of the sweep
of ``lab.studies.self_score_runs --set test``; None for a setting the sweep does not run). The
contact sheet is copied to ``calibration_nano_<n>.sheet.png``. Wall times are left out: this
machine is shared (the calibration's time is measured on an idle machine, from the same
command). With ``--work DIR`` the calibration runs in DIR and a finished report there is
reused (``report_reused_from_work``), so the verdicts can be attached again after the sweep
grows without calibrating twice.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from lab.benchmarks.common import RESULTS_DIR, save_png, write_result
from lab.nano import scenes
from lab.studies.paired_stats import group_index
from lab.studies.self_score import BASE, evaluator_rows, stored_runs
from lab.studies.self_score_runs import settings
from ladr_core import nano_model_path
from ladr_core.calibrate import cli

ROOT = Path(__file__).resolve().parents[2]

SWEEP_NAME = {"paper": "ladr-paper", "paper-gumbel": "ladr-paper-gumbel",
              "adaptive": "ladr-adaptive", "nano": "ladr-nano", "tau0.5": "ladr-tau0.5",
              "tau0.7": "ladr-tau0.7", "tau0.9": "ladr-tau0.9"}
"""Calibration candidate -> the sweep's setting of the same strategy and T."""
KEEP = ("name", "role", "strategy", "nfe", "token_forwards", "denoiser_calls", "self_score",
        "vs_reference", "vs_reference_t", "noninferiority_lo", "vs_matched", "qualifies",
        "below_reference", "spread", "prompts_needed")


def test_verdicts(runs_dir: Path, prompts: int = 490, batch: int = 35) -> dict[str, Any]:
    """{sweep setting: the evaluator's overall and paired difference to baseline-64} on the
    test set (complete chunks only); when the sweep is not there (it is outside git), the
    committed verdicts of ``self_score_test.json`` (the same sweep's first 105 test prompts)."""
    try:
        runs, n = stored_runs(runs_dir / "test", list(settings()), prompts, batch)
    except SystemExit:
        committed = RESULTS_DIR / "self_score_test.json"
        if not committed.is_file():
            return {}
        data = json.loads(committed.read_text())
        n = data["meta"]["prompts"]
        return {s: {"overall": r["overall"], "vs_baseline_64": None if s == BASE else r["diff"],
                    "prompts": n, "from": "self_score_test.json"}
                for s, r in data["evaluator"].items()}
    gidx = group_index([scenes.group_of(s) for s in scenes.quality_test_specs(n)])
    rows = evaluator_rows(runs, gidx)
    return {s: {"overall": r["overall"], "vs_baseline_64": None if s == BASE else r["diff"],
                "prompts": n} for s, r in rows.items()}


def run_calibration(chosen: list[str], work: Path | None
                    ) -> tuple[dict[str, Any], int, str, bool]:
    """(report, exit status, stderr, reused?) of the calibrate command on ``chosen``, run in
    ``work`` (a temporary folder when None). A report already in ``work`` for the same
    prompts is reused with its exit status and stderr: the verdicts can be attached again
    without a second run."""
    tmp = work or Path(tempfile.mkdtemp(prefix="ladr_cal_"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        done = tmp / "report.json"
        if work is not None and done.is_file():
            report = json.loads(done.read_text())
            if report["conditions"].get("prompt_texts") == chosen:
                return (report, int((tmp / "exit_status.txt").read_text()),
                        (tmp / "stderr.txt").read_text(), True)
        (tmp / "prompts.txt").write_text("\n".join(chosen) + "\n")
        argv_cal = ["nano", "--prompts", str(tmp / "prompts.txt"), "--json", str(done),
                    "--calibration-file", str(tmp / "beside.json")]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(argv_cal)
        (tmp / "stderr.txt").write_text(err.getvalue())
        (tmp / "exit_status.txt").write_text(f"{code}\n")
        return json.loads(done.read_text()), code, err.getvalue(), False
    finally:
        if work is None:
            shutil.rmtree(tmp, ignore_errors=True)


def chosen_prompts(prompts_file: str, prompts: int) -> tuple[list[str], str]:
    """(the prompts to calibrate, the results file's tag): every line of ``prompts_file``
    (tag: its stem), else the first ``prompts`` lines of nano's list (tag: the count)."""
    if prompts_file:
        lines = Path(prompts_file).read_text().splitlines()
        return ([p.strip() for p in lines if p.strip()],
                Path(prompts_file).stem.removeprefix("calibration_nano_"))
    lines = (nano_model_path() / "calibration_prompts.txt").read_text().splitlines()
    return [p for p in lines if p.strip()][:prompts], str(prompts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=48)
    ap.add_argument("--prompts-file", default="", help="calibrate these prompts (one a line) "
                    "instead of the first --prompts of nano's list; the results file is "
                    "calibration_nano_<file's stem>.json")
    ap.add_argument("--runs", default=str(RESULTS_DIR / "self_score_runs"))
    ap.add_argument("--out", default=str(RESULTS_DIR))
    ap.add_argument("--work", default="", help="folder to run the calibration in and keep it "
                    "(a finished report there for the same prompts is reused)")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    chosen, tag = chosen_prompts(a.prompts_file, a.prompts)
    # a temporary work folder lives until the sheet is copied out of it
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="ladr_cal_"))
    try:
        report, code, err, reused = run_calibration(chosen, work)
        name = f"calibration_nano_{tag}"
        if report.get("sheet"):
            save_png(Image.open(report["sheet"]), Path(a.out) / f"{name}.sheet.png")
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    verdicts = test_verdicts(Path(a.runs))
    cands = []
    for c in report["candidates"]:
        row = {k: c.get(k) for k in KEEP}
        sweep = SWEEP_NAME.get(c["name"], c["name"])
        row["evaluator_test"] = verdicts.get(sweep)
        cands.append(row)
    ref = report["candidates"][0]
    rec = next(c for c in report["candidates"] if c["name"] == report["recommended"])
    payload = {
        "command": "python -m ladr_core.calibrate nano --prompts " + (
            a.prompts_file if a.prompts_file else
            f"<first {a.prompts} lines of calibration_prompts.txt>"),
        "exit_status": code, "report_reused_from_work": reused, "stderr_lines": [ln for ln in err.splitlines()
                                              if not ln.startswith("[")],
        "prompts": chosen, "conditions": {k: v for k, v in report["conditions"].items()
                                          if k != "prompt_texts"},
        "margin": report["margin"], "recommended": report["recommended"],
        "recommend_rule": report["recommend_rule"], "why": report["why"],
        "prompts_needed": report["prompts_needed"], "warnings": report["warnings"],
        "to_try": report.get("to_try"), "lead_needed": report.get("lead_needed"),
        "text": report["text"],
        "recommended_forwards_share": rec["token_forwards"] / ref["token_forwards"],
        "denoiser_calls": report["denoiser_calls"],
        "sheet_columns": report.get("sheet_columns"),
        "sheet": f"lab/results/{name}.sheet.png" if report.get("sheet") else None,
        "candidates": cands,
        "evaluator_note": "evaluator_test: the nano evaluator on the TEST set ("
                          f"{next(iter(verdicts.values()))['prompts'] if verdicts else 0} "
                          "prompts, lab.studies.self_score_runs), overall and paired difference to "
                          "baseline-64 (95 % bootstrap, stratified); None: not in the sweep"}
    path = write_result(name, payload, Path(a.out))
    print(report["text"])  # the table's s/img column: this shared machine, not a figure
    print(f"exit {code}; wrote {path}")
    return payload


if __name__ == "__main__":
    main()
