"""Throughput (images per minute) of the nano example on 1 ComfyUI server vs a ComfyUI-Distributed
cluster of 3 (master + 2 workers), all on this machine's CPU, 1 torch thread per server.

    COMFYUI_PATH=/work/comfyui COMFYUI_DISTRIBUTED_PATH=/work/comfyui-distributed \\
    COMFYUI_PYTHON=/work/comfy-venv/bin/python nice -n 10 .venv/bin/python -m lab.benchmarks.scale_out

Cases, interleaved per repetition (A B C A B C ...), each making --images images of distinct
(prompt, seed) jobs with example_workflows/api/ladr_distributed_seed_collector.json (48 px, nano preset):
  one_server   POST /prompt on the master alone (the collector passes through; workers idle)
  balanced_3   POST /distributed/queue per image with load_balance (queue_prompts --distributed)
  parallel_3   one /distributed/queue "click" = master + 2 workers (Distributed Seed s, s+1, s+2)
Throughput = images / (last image saved - first job queued). All three servers stay up (and hold
their model copy) for every case. READ THIS: three 1-thread servers on a 2-core machine shared with
other jobs cannot go 3x; the ratio shows the engine's overhead and how much of the 2 cores the
cluster gets, not a GPU cluster's scaling (docs/reports/SCALE_OUT.md has the N-GPU projection).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from lab.benchmarks.common import REPO_ROOT, base_parser, print_table, write_result
from lab.workflows import queue_prompts as qp

EXAMPLE = REPO_ROOT / "example_workflows" / "api" / "ladr_distributed_seed_collector.json"
PROMPTS = ["a red circle", "a blue square", "a green triangle", "two circles",
           "a purple square above an orange circle", "a yellow circle to the left of a red square"]


def cluster_module() -> Any:
    """tests/kit/comfy_cluster.py: the loopback cluster the integration test uses, reused."""
    from tests.kit import comfy_cluster

    return comfy_cluster


def graph(prompt: str, seed: int) -> dict:
    wf = json.loads(EXAMPLE.read_text())
    wf["3"]["inputs"]["prompt"] = prompt
    wf["7"]["inputs"]["seed"] = seed
    return wf


def one_server(url: str, n: int, seed: int) -> int:
    """n plain jobs queued at once on one server; returns the images saved."""
    jobs = [graph(PROMPTS[i % len(PROMPTS)], seed + i) for i in range(n)]
    ids = [qp.queue(url, wf, "bench") for wf in jobs]
    return sum(len(qp.saved_images(qp.wait(url, pid, 900), wf)) for pid, wf in zip(ids, jobs, strict=True))


def balanced(url: str, n: int, seed: int, workers: list[str]) -> int:
    """n load-balanced jobs (each runs once, on the least-busy participant)."""
    base = graph(PROMPTS[0], seed)
    batch = qp.distributed_jobs(base, [PROMPTS[i % len(PROMPTS)] for i in range(n)], seed)
    records = qp.run_distributed(url, batch, workers, timeout=900, retries=0)
    return sum(len(r["images"]) for r in records)


def parallel(url: str, n: int, seed: int, workers: list[str]) -> int:
    """ceil(n / participants) clicks of the example; each gives one image per participant."""
    per_click = len(workers) + 1
    ids, jobs = [], []
    for k in range(-(-n // per_click)):
        wf = graph(PROMPTS[k % len(PROMPTS)], seed + per_click * k)
        body = qp.post_json(url, "/distributed/queue", {
            "prompt": wf, "client_id": "bench", "enabled_worker_ids": workers})
        ids.append(body["prompt_id"])
        jobs.append(wf)
    return sum(len(qp.saved_images(qp.wait(url, pid, 900), wf)) for pid, wf in zip(ids, jobs, strict=True))


def rss_mb(pid: int) -> float | None:
    """Resident memory of one server process (Linux /proc), MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def master_cost_per_image(side: int = 1024, reps: int = 3) -> dict[str, float]:
    """CPU seconds the master spends per collected image at `side` px, whatever N is: the
    worker's envelope (PNG at compress_level 0, as the engine sends it, base64) decoded on the
    master, then re-encoded by Save Image (PNG, compress_level 4). Noise = worst case for PNG;
    the transferred envelope size is reported too (it bounds the network time per image)."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=0)
    envelope = base64.b64encode(buf.getvalue())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        decoded = Image.open(io.BytesIO(base64.b64decode(envelope))).convert("RGB")
        np.asarray(decoded, dtype=np.float32) / 255.0
        decoded.save(io.BytesIO(), format="PNG", compress_level=4)
        times.append(time.perf_counter() - t0)
    return {"side_px": side, "envelope_mb": len(envelope) / 1e6,
            "master_s_per_image_median": statistics.median(times)}


def timed(fn, *args) -> tuple[float, int]:
    t0 = time.perf_counter()
    images = fn(*args)
    return time.perf_counter() - t0, images


def runs_on(worker_urls: list[str]) -> list[int]:
    """Prompts each worker has executed so far (its /history length)."""
    return [len(qp.post_json(u, "/history?max_items=100000")) for u in worker_urls]


def measure(url: str, workers: list[str], worker_urls: list[str], n: int,
            reps: int) -> list[dict]:
    cases = {"one_server": lambda s: one_server(url, n, s),
             "balanced_3": lambda s: balanced(url, n, s, workers),
             "parallel_3": lambda s: parallel(url, n, s, workers)}
    runs: dict[str, list[tuple[float, int]]] = {k: [] for k in cases}
    spread: dict[str, list[list[int]]] = {k: [] for k in cases}
    seed = 10_000
    for _ in range(reps):
        for name, fn in cases.items():
            before = runs_on(worker_urls)
            runs[name].append(timed(fn, seed))  # fresh seeds: no cached outputs
            spread[name].append([a - b for a, b in zip(runs_on(worker_urls), before,
                                                       strict=True)])
            seed += 1_000
    rows = []
    for name, results in runs.items():
        ipm = [60.0 * images / secs for secs, images in results]
        rows.append({"case": name, "images_per_run": [i for _, i in results],
                     "runs_per_worker": spread[name],
                     "seconds": [round(s, 2) for s, _ in results],
                     "images_per_min_median": statistics.median(ipm)})
    ref = rows[0]["images_per_min_median"]
    for r in rows:
        r["ratio_to_one_server"] = r["images_per_min_median"] / ref
    return rows


def warm_up(cluster: Any, workers: list[str]) -> float:
    """One parallel click (loads the model on every server); returns its seconds."""
    t0 = time.perf_counter()
    parallel(cluster.master.url, len(workers) + 1, 1, workers)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=12, help="images per case and repetition")
    args = ap.parse_args(argv)
    comfy, engine = os.environ.get("COMFYUI_PATH"), os.environ.get("COMFYUI_DISTRIBUTED_PATH")
    if not (comfy and engine):
        ap.error("set COMFYUI_PATH and COMFYUI_DISTRIBUTED_PATH (and COMFYUI_PYTHON)")
    n, reps = (3, 1) if args.tiny else (args.images, args.reps or 2)
    cc = cluster_module()
    with tempfile.TemporaryDirectory(prefix="ladr_scale_out_") as tmp:
        cluster = cc.start_cluster(Path(tmp), 3, comfy, engine, worker_timeout_s=120)
        try:
            workers = ["1", "2"]
            warm_s = warm_up(cluster, workers)
            rss = {sv.name: rss_mb(sv.proc.pid) for sv in cluster.servers}
            load_before = os.getloadavg()[0]
            rows = measure(cluster.master.url, workers,
                           [sv.url for sv in cluster.servers[1:]], n, reps)
            load_after = os.getloadavg()[0]
            with urllib.request.urlopen(cluster.master.url + "/system_stats", timeout=30) as r:
                system = json.loads(r.read())["system"]
        finally:
            cluster.stop()
    master_cost = master_cost_per_image(256 if args.tiny else 1024)
    print_table(f"nano example, {n} images per run, {reps} interleaved reps", copy.deepcopy(rows))
    print(f"master per collected {master_cost['side_px']} px image: "
          f"{master_cost['master_s_per_image_median']:.3f} s, "
          f"envelope {master_cost['envelope_mb']:.1f} MB")
    path = write_result("scale_out", {
        "command": "python -m lab.benchmarks.scale_out " + " ".join(argv or sys.argv[1:]),
        "servers": 3, "torch_threads_per_server": 1, "images_per_run": n, "reps": reps,
        "server_torch": system.get("pytorch_version"), "comfyui": system.get("comfyui_version"),
        "warm_up_click_s": warm_s, "rss_mb_after_warm_up": rss, "load_avg_1m_before": load_before,
        "load_avg_1m_after": load_after, "rows": rows, "master_cost": master_cost,
        "reading": ("2 CPU cores shared with other jobs, 1 torch thread per server: three "
                    "servers can use at most 2 cores, so the ideal ratio here is 2, not 3; "
                    "a GPU cluster's scaling is not shown (docs/reports/SCALE_OUT.md)")}, args.out)
    print(f"\nwrote {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
