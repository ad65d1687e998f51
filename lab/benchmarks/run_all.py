"""Run every benchmark (each in its own interpreter) and summarise them in one table.

Each script writes ``lab/results/<name>.json``; this script then writes
``lab/results/summary.json`` and ``summary.md`` (the README's Performance table: every
figure with its target and whether it is met). A script that fails is reported and the others
still run.

Run: ``python -m lab.benchmarks.run_all [--quick] [--official DIR] [--only NAME ...]``
(``--tiny`` = smoke sizes, figures meaningless).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lab.benchmarks.common import REPO_ROOT, RESULTS_DIR, env_info
from lab.benchmarks.summary import summary_rows, to_markdown

# name -> extra CLI arguments for a full run (kept to a few minutes on a busy 2-core CPU)
SCRIPTS: dict[str, list[str]] = {
    "host_syncs": ["--pipeline"],
    "sampler_overhead": ["--steps", "4", "--reps", "2"],
    "native_forward": ["--reps", "2"],
    "ml_cache": [],
    "loader_memory": [],
    "preview_cost": [],
    "end_to_end": [],
    "soak": [],
}
QUICK: dict[str, list[str]] = {
    "sampler_overhead": ["--steps", "2", "--reps", "1", "--batch", "1"],
    "native_forward": ["--reps", "1", "--layers", "4"],
    "ml_cache": ["--reps", "1"],
    "loader_memory": ["--no-naive"],
    "preview_cost": ["--reps", "3"],
    "end_to_end": ["--reps", "1"],
    "soak": ["--gens", "50"],
}


def run_script(name: str, extra: list[str], out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", f"lab.benchmarks.{name}", "--out", str(out), *extra]
    print(f"\n##### {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, text=True, stdout=sys.stdout, stderr=subprocess.PIPE,
                          check=False)
    status = {"name": name, "args": extra, "seconds": time.perf_counter() - t0,
              "returncode": proc.returncode}
    if proc.returncode != 0:
        status["error"] = proc.stderr[-3000:]
        print(f"!!!!! {name} failed:\n{status['error']}", flush=True)
    return status


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller runs")
    parser.add_argument("--tiny", action="store_true", help="smoke sizes (figures meaningless)")
    parser.add_argument("--official", type=Path, default=None,
                        help="folder with the official modeling_llada.py (native_forward)")
    parser.add_argument("--only", nargs="+", choices=sorted(SCRIPTS), default=None)
    args = parser.parse_args(argv)
    runs = []
    for name, extra in SCRIPTS.items():
        if args.only and name not in args.only:
            continue
        extra = list(QUICK.get(name, extra) if args.quick else extra)
        if args.tiny:
            extra = ["--tiny"] + (["--pipeline"] if name == "host_syncs" else [])
        if name == "native_forward" and args.official:
            extra += ["--official", str(args.official)]
        runs.append(run_script(name, extra, args.out))
    results = {}
    for name in SCRIPTS:
        path = args.out / f"{name}.json"
        if path.is_file():
            results[name] = json.loads(path.read_text())
    rows = summary_rows(results)
    markdown = to_markdown(rows)
    summary = {"env": env_info(), "runs": runs, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "summary.md").write_text(markdown + "\n")
    print("\n" + markdown)
    failed = [r["name"] for r in runs if r["returncode"] != 0]
    print(f"\n{len(runs) - len(failed)}/{len(runs)} scripts ran"
          + (f"; FAILED: {', '.join(failed)}" if failed else "")
          + f"; total {sum(r['seconds'] for r in runs):.0f} s; summary in {args.out}/summary.md")
    return summary


if __name__ == "__main__":
    main()
