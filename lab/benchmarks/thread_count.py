"""Nano generation time per torch thread count, interleaved (one box, one load, one run).

On a CPU box whose cores are busy with other work, torch's intra-op threads wait for each other
at every small matmul; the DiMOO-nano forward is tiny (d_model 128, 48 px), so extra threads
can cost more than they give. This prints the median seconds of one nano LADR generation
(nano preset, 128-step schedule, cfg 0.75, 48 px) per thread count, runs interleaved so a
change of load hits every count alike, and the machine's load average before and after.

Run: ``python -m lab.benchmarks.thread_count [--counts 1 2] [--repeats 5]``; writes
lab/results/thread_count.json (with the commit, the CPU and the load).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch


def main(argv: list[str] | None = None) -> dict:
    import ladr_core
    from lab.benchmarks.common import RESULTS_DIR, write_result

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 2],
                    help="torch thread counts to compare (default 1 2)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(RESULTS_DIR), help="folder for thread_count.json")
    a = ap.parse_args(argv)
    pipe = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)
    load_before = os.getloadavg()
    times: dict[int, list[float]] = {n: [] for n in a.counts}
    for r in range(a.repeats):
        for n in a.counts:
            torch.set_num_threads(n)
            t0 = time.perf_counter()
            pipe.generate("a red circle to the left of a blue square", steps=128, cfg=0.75,
                          seed=r, strategy="nano")
            times[n].append(time.perf_counter() - t0)
    doc = {"cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
           "median_s": {n: round(statistics.median(v), 3) for n, v in times.items()},
           "all_s": {n: [round(x, 3) for x in v] for n, v in times.items()},
           "command": "python -m lab.benchmarks.thread_count " + " ".join(
               sys.argv[1:] if argv is None else argv)}
    print(json.dumps(doc))
    print("wrote", write_result("thread_count", doc, a.out))
    return doc


if __name__ == "__main__":
    main()
