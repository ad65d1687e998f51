"""Shared helpers for the benchmark scripts: interleaved timing, host-sync counting, JSON output.

Every script measures the things it compares *side by side in one run*: repetitions of A, B, C
are interleaved (A B C A B C ...) and the median of each is reported, together with the ratio
of medians. The machines this runs on are noisy (2 shared cores, other jobs), so an absolute
time is only meaningful next to its neighbour measured in the same loop.

Run a script as a module from the repository root, e.g. ``python -m lab.benchmarks.host_syncs``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO_ROOT / "lab" / "results"

NOISE_NOTE = (
    "CPU figures from a shared 2-core machine (other jobs, incl. model training, may run); "
    "compare ratios measured in the same run, not absolute times across runs."
)

GPU_NOTE = ("GPU figures from a lent machine (its device name is in 'gpu'); the host CPU only "
            "dispatches, so a time here is comparable within this file's run.")


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """Summary of repeated wall-clock measurements (seconds)."""

    median: float
    minimum: float
    maximum: float
    reps: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median_s": self.median, "min_s": self.minimum, "max_s": self.maximum,
                "reps": self.reps}


def summarize(times: list[float]) -> Timing:
    """Median/min/max of a list of durations (seconds); the list must not be empty."""
    if not times:
        raise ValueError("summarize() needs at least one measurement")
    return Timing(statistics.median(times), min(times), max(times), len(times))


def interleaved(cases: Mapping[str, Callable[[], Any]], reps: int,
                warmup: int = 1) -> dict[str, Timing]:
    """Time each case ``reps`` times, round-robin (A B C A B C ...), after ``warmup`` rounds.

    Interleaving spreads background noise evenly over the cases so that the ratio of their
    medians is meaningful even when absolute times drift during the run.
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: summarize(ts) for name, ts in times.items()}


def ratio(a: float, b: float) -> float:
    """a / b, or inf when b is zero (kept JSON-safe by ``write_result``)."""
    return a / b if b else float("inf")


# --------------------------------------------------------------------------- host syncs

def result_name(base: str, device: torch.device) -> str:
    """``base`` for a CPU run, ``base_<gpu>`` for a GPU run (see ``device_slug``)."""
    return base if device.type == "cpu" else f"{base}_{device_slug(device)}"


def device_slug(device: torch.device) -> str:
    """``nvidia_h100_80gb_hbm3`` for a GPU, ``cpu`` otherwise: the suffix of GPU result files."""
    import re

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def sync_device(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- output


def median_ms(fn: Callable[[], Any], device: torch.device, reps: int, warmup: int = 1) -> float:
    """Median ms of ``reps`` calls of ``fn`` after ``warmup`` calls, the device synchronised
    around each timed call."""
    for _ in range(warmup):
        fn()
    sync_device(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync_device(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def env_info() -> dict[str, Any]:
    """Machine/software facts stored next to every result."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                                capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        commit = ""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # a copy of the tree without .git (the GPU box) names its commit in LADR_GIT_COMMIT
        "git_commit": os.environ.get("LADR_GIT_COMMIT") or commit,
        "gpu": gpu,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "note": GPU_NOTE if gpu else NOISE_NOTE,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def json_text(doc: Any, open_levels: int = 2, _level: int = 0) -> str:
    """A results JSON's text: the keys of the top ``open_levels`` levels of objects one per
    line, everything below them on one line without spaces (a third of the size of
    ``indent=1`` for the per-prompt lists and per-setting tables), ending with a newline at
    the top."""
    if isinstance(doc, Mapping) and doc and _level < open_levels:
        pad = " " * (_level + 1)
        items = [f"{pad}{json.dumps(str(k))}: {json_text(v, open_levels, _level + 1)}"
                 for k, v in doc.items()]
        text = "{\n" + ",\n".join(items) + "\n" + " " * _level + "}"
    else:
        text = json.dumps(doc, separators=(",", ":"))
    return text + "\n" if _level == 0 else text


def save_png(image: Any, path: Path | str) -> None:
    """A results picture (PIL image) as a palette PNG: 256 colours, no dithering, which keeps
    the sample sheets and plots as they read at about half the bytes of full colour."""
    from PIL import Image  # noqa: PLC0415 - only for pictures

    alpha = "A" in image.getbands() and image.getchannel("A").getextrema() != (255, 255)
    image = image.convert("RGBA" if alpha else "RGB")
    method = Image.Quantize.FASTOCTREE if alpha else Image.Quantize.MEDIANCUT
    image.quantize(256, method=method, dither=Image.Dither.NONE).save(path, optimize=True)


def save_figure(fig: Any, path: Path | str) -> None:
    """A matplotlib figure through ``save_png``."""
    from PIL import Image  # noqa: PLC0415 - only for pictures

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    buf.seek(0)
    save_png(Image.open(buf), path)


def write_result(name: str, payload: Mapping[str, Any], out_dir: Path | None = None) -> Path:
    """Write ``{"benchmark": name, "env": ..., **payload}`` to ``<out_dir>/<name>.json``."""
    out_dir = Path(out_dir) if out_dir is not None else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    doc = {"benchmark": name, "env": env_info(), **payload}
    path.write_text(json_text(_json_safe(doc)))
    return path


def print_table(title: str, rows: list[Mapping[str, Any]]) -> None:
    """Print rows (dicts with the same keys) as an aligned plain-text table."""
    print(f"\n== {title}")
    if not rows:
        print("(no rows)")
        return
    cols = list(rows[0])
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0 or 1e-3 <= abs(value) < 1e5:
            return f"{value:.4g}"
        return f"{value:.3e}"
    return str(value)


def base_parser(description: str) -> argparse.ArgumentParser:
    """CLI shared by every script: ``--tiny`` (smoke-test sizes), ``--reps``, ``--out``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tiny", action="store_true",
                        help="tiny sizes for smoke tests (figures are meaningless)")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per case")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR,
                        help="directory for the JSON result (default lab/results)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help="torch.set_num_threads (default 1, see DEFAULT_THREADS; "
                             "0 keeps torch's default)")
    return parser


# One intra-op thread by default: on a shared machine whose other cores are busy (here a
# training job on a 2-core box), an OpenMP parallel region waits for a descheduled worker, and
# small ops slow down by orders of magnitude (a 64-token preview gather: 0.02 ms with 1 thread,
# 20 ms with 2). Ratios need both sides measured alike, not maximal throughput.
DEFAULT_THREADS = 1


def apply_threads(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)


# --------------------------------------------------------------------------- models & memory


def strategy_from(name: Any, policy: Any = None) -> Any:
    """A strategy object from a benchmark table's (strategy name, policy) pair: LADR(policy),
    Prophet(policy) or Baseline() (policy None = the strategy's defaults); a table entry that
    holds a strategy object (Threshold(tau), Halton(), ...) passes it through unchanged."""
    from ladr_core import LADR, Baseline, Prophet, Strategy

    if isinstance(name, Strategy):
        return name

    if name == "ladr":
        return LADR() if policy is None else LADR(policy)
    if name == "prophet":
        return Prophet() if policy is None else Prophet(policy)
    if name != "baseline":
        raise ValueError(f"unknown strategy {name!r} in a benchmark table")
    return Baseline()


def tiny_checkpoint(folder: Path) -> Path:
    """The tests' tiny random DiMOO checkpoint (tests/kit/tiny_checkpoint.py), written once into
    ``folder``."""
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    if not (folder / "config.json").is_file():
        write_tiny_checkpoint(folder)
    return folder


def model_for_bench(tmp: Path) -> tuple[Path, str]:
    """(folder, label): the shipped nano model when present, else the tests' tiny fixture."""
    import ladr_core

    nano = ladr_core.nano_model_path()
    weights = (nano / "model.safetensors.index.json").is_file() or (
        nano / "model.safetensors").is_file()
    if (nano / "config.json").is_file() and weights and (nano / "vqvae" / "config.json").is_file():
        return nano, "nano"
    return tiny_checkpoint(tmp / "tiny_fixture"), "tiny test fixture (nano model not present)"


MEMORY_PROBE = r"""
import json, sys
def status():
    out = {}
    for line in open("/proc/self/status"):
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            out[key] = int(rest.split()[0]) * 1024
    return out
"""


def run_memory_probe(body: str, timeout: float = 900.0) -> dict[str, Any]:
    """Run ``body`` in a fresh interpreter; return its /proc/self/status memory (bytes) + extras.

    ``body`` may set a dict ``extra`` that is merged into the result. Peak = ``VmHWM``.
    """
    code = MEMORY_PROBE + "\nextra = {}\n" + body + "\nprint('PROBE' + json.dumps({**status(), **extra}))\n"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"memory probe failed:\n{out.stderr[-2000:]}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("PROBE")][-1]
    return json.loads(line[len("PROBE"):])
