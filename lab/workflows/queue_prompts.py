"""Queue a list of prompts against a running ComfyUI server's /prompt API (stdlib only).

    python -m lab.workflows.queue_prompts example_workflows/api/ladr_nano_text_to_image.json \
        --prompts prompts.txt --server http://127.0.0.1:8188 --wait

Each non-empty line of the prompts file (or each --prompt) becomes one queued job: the workflow
(API format) with every DiMOO Sampler's `prompt` replaced and, with --seed, its seed set to
seed + job index. Without prompts the workflow is queued once as it is. A validation error from
the server (bad size, missing model folder, ...) is printed per node and the script exits 1.

With --distributed the server is a ComfyUI-Distributed master and the workflow must hold a
Distributed Collector (example_workflows/api/ladr_distributed_seed_collector.json does): every job goes
to POST /distributed/queue with `load_balance` on, so it runs once, on the least-busy participant,
and its images are saved by the master. A Distributed Seed feeding a sampler is replaced by its
seed value (job i gets seed + i with --seed), so an image does not depend on where it ran. The
script waits for all jobs; a job that finished without an image (its worker died or failed: the
engine's Collector then hands Save Image an empty batch after its worker timeout, and the master
reports an IndexError) is queued again, at most --retries times, and reported if it never
produced one (exit 1). See docs/reports/SCALE_OUT.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

SAMPLERS = ("LADR_DiMOOSampler2", "LADR_DiMOOSampler")  # DiMOO Sampler, its legacy twin
COLLECTOR = "DistributedCollector"
DIST_SEED = "DistributedSeed"


def load_prompts(path: str | None, inline: list[str]) -> list[str]:
    """Prompt lines from a file (blank lines and lines starting with # skipped) + --prompt."""
    lines = list(inline)
    if path:
        text = Path(path).read_text(encoding="utf-8")
        lines += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return lines


def jobs(workflow: dict, prompts: list[str], seed: int | None) -> list[dict]:
    """One API-format workflow per prompt (the workflow itself when there are no prompts)."""
    samplers = [k for k, n in workflow.items() if n.get("class_type") in SAMPLERS]
    if prompts and not samplers:
        raise ValueError("workflow has no DiMOO Sampler node (LADR_DiMOOSampler2, or the "
                         "legacy LADR_DiMOOSampler) to put the prompts into")
    out = []
    for i, text in enumerate(prompts or [None]):
        wf = copy.deepcopy(workflow)
        for k in samplers:
            if text is not None:
                wf[k]["inputs"]["prompt"] = text
            if seed is not None:
                wf[k]["inputs"]["seed"] = seed + i
        out.append(wf)
    return out


def post_json(server: str, route: str, payload: dict | None = None) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(server.rstrip("/") + route, data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"{}")


def queue(server: str, workflow: dict, client_id: str) -> str:
    """POST /prompt; returns the prompt id or raises ValueError with the node errors."""
    try:
        return post_json(server, "/prompt", {"prompt": workflow, "client_id": client_id})[
            "prompt_id"]
    except urllib.error.HTTPError as err:
        body = json.loads(err.read() or b"{}")
        lines = [body.get("error", {}).get("message", str(err))]
        for node, info in body.get("node_errors", {}).items():
            for e in info.get("errors", []):
                lines.append(f"  node {node} ({info.get('class_type')}): {e.get('message')}: "
                             f"{e.get('details')}")
        raise ValueError("\n".join(lines)) from None


def wait(server: str, prompt_id: str, timeout: float) -> dict:
    """Poll /history/<id> until the job has finished (or failed); returns its entry."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        hist = post_json(server, f"/history/{prompt_id}")
        if prompt_id in hist and hist[prompt_id].get("status", {}).get("completed") is not None:
            return hist[prompt_id]
        time.sleep(0.5)
    raise TimeoutError(f"prompt {prompt_id} did not finish within {timeout:.0f} s")


def _is_link(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2


def distributed_jobs(workflow: dict, prompts: list[str], seed: int | None) -> list[dict]:
    """jobs() for POST /distributed/queue: each job runs once, on one least-busy participant.

    Every Distributed Collector gets `load_balance` on. A sampler seed linked to a Distributed
    Seed becomes that node's seed value (the engine would add the participant's index + 1 on a
    worker, so the image would depend on where the job ran); unused Distributed Seeds are dropped.
    """
    if not [k for k, n in workflow.items() if n.get("class_type") == COLLECTOR]:
        raise ValueError(f"workflow has no {COLLECTOR} node: put ComfyUI-Distributed's "
                         "Distributed Collector between the VQ decode and Save Image "
                         "(see example_workflows/api/ladr_distributed_seed_collector.json)")
    base = copy.deepcopy(workflow)
    for node in base.values():
        inputs = node.get("inputs", {})
        if node.get("class_type") == COLLECTOR:
            inputs["load_balance"] = True
        src = inputs.get("seed")
        if node.get("class_type") in SAMPLERS and _is_link(src) and \
                base.get(str(src[0]), {}).get("class_type") == DIST_SEED:
            value = base[str(src[0])]["inputs"].get("seed")
            if not isinstance(value, int):
                raise ValueError(f"the {DIST_SEED} feeding sampler node {src[0]} has no seed "
                                 "value of its own: give it one, or pass --seed")
            inputs["seed"] = value
    used = {str(v[0]) for n in base.values() for v in n.get("inputs", {}).values() if _is_link(v)}
    base = {k: n for k, n in base.items() if n.get("class_type") != DIST_SEED or k in used}
    return jobs(base, prompts, seed)


def _error_text(err: urllib.error.HTTPError) -> str:
    raw = err.read() or b"{}"
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
    msg = body.get("error", body.get("errors", str(err)))
    lines = [msg.get("message", str(msg)) if isinstance(msg, dict) else str(msg)]
    for node, info in body.get("node_errors", {}).items():
        for e in info.get("errors", []):
            lines.append(f"  node {node} ({info.get('class_type')}): {e.get('message')}: "
                         f"{e.get('details')}")
    return "\n".join(lines)


def enabled_workers(server: str) -> list[str]:
    """Ids of the workers enabled in the master's ComfyUI-Distributed config."""
    cfg = post_json(server, "/distributed/config")
    return [str(w["id"]) for w in cfg.get("workers", []) if w.get("enabled")]


def queue_distributed(server: str, workflow: dict, client_id: str,
                      worker_ids: list[str]) -> str:
    """POST /distributed/queue; returns the master's prompt id or raises ValueError with the
    master's message (a worker's rejection names the worker's failing node and its error)."""
    try:
        return post_json(server, "/distributed/queue", {
            "prompt": workflow, "client_id": client_id,
            "enabled_worker_ids": worker_ids})["prompt_id"]
    except urllib.error.HTTPError as err:
        raise ValueError(_error_text(err)) from None


def saved_images(entry: dict, workflow: dict) -> list[dict]:
    """The images the workflow's Save Image nodes wrote ({filename, subfolder, type})."""
    saves = [k for k, n in workflow.items() if n.get("class_type") == "SaveImage"]
    return [img for k in saves for img in entry.get("outputs", {}).get(k, {}).get("images", [])]


REJECTED = ("validation", "Worker rejected", "node_errors")
"""What the master's refusal of a workflow says (ComfyUI-Distributed: its own or a worker's
validation failure, or a worker's negative acknowledgement). Any other refusal of a job (a
worker it had found online is gone as the job is sent: 'Cannot connect to host', 'Connection
reset by peer', 'Worker websocket closed before dispatch_ack was received', ...) is a lost
attempt, tried again on the next attempt, when the engine skips the dead worker."""


def is_rejection(message: str) -> bool:
    """True when the master refused the workflow itself (REJECTED), not just lost a worker."""
    low = message.lower()
    return any(marker.lower() in low for marker in REJECTED)


def _queue_all(server: str, batch: list[dict], todo: list[int], client_id: str,
               worker_ids: list[str], records: list[dict], attempt: int, log
               ) -> tuple[list[tuple[int, str]], list[int]]:
    """Queue the jobs in `todo`: (index, prompt id) of those queued, and the indices the master
    could not hand to a worker (tried again next attempt, when the engine skips the dead
    worker). Any other refusal (a workflow the master rejects) raises ValueError."""
    queued, again = [], []
    for i in todo:
        try:
            queued.append((i, queue_distributed(server, batch[i], client_id, worker_ids)))
        except ValueError as err:
            if is_rejection(str(err)):
                raise
            records[i]["error"] = f"not queued: {err}"
            again.append(i)
            log(f"  job {i} attempt {attempt + 1}: {records[i]['error']}")
    return queued, again


def run_distributed(server: str, batch: list[dict], worker_ids: list[str], timeout: float,
                    retries: int = 2, log=print) -> list[dict]:
    """Queue every job on the master, wait for all, re-queue those that came back without an
    image or that the master could not hand to a worker (at most `retries` times). Returns one record per job: index, prompt_ids (one per
    attempt), images (of the last attempt), error (None when it produced images)."""
    client_id = str(uuid.uuid4())
    records = [{"index": i, "prompt_ids": [], "images": [], "error": None}
               for i in range(len(batch))]
    todo = list(range(len(batch)))
    deadline = time.monotonic() + timeout
    for attempt in range(retries + 1):
        queued, todo = _queue_all(server, batch, todo, client_id, worker_ids, records, attempt,
                                  log)
        for i, pid in queued:
            rec = records[i]
            rec["prompt_ids"].append(pid)
            left = max(1.0, deadline - time.monotonic())
            entry = wait(server, pid, left)
            status = entry.get("status", {})
            rec["images"] = saved_images(entry, batch[i])
            if status.get("status_str") != "success":
                msgs = [m[1].get("exception_message", "") for m in status.get("messages", [])
                        if m[0] == "execution_error"]
                rec["error"] = (f"failed: {' '.join(msgs) or status.get('status_str')} (if a "
                                "worker died or failed, the master's log says 'Heartbeat timeout')")
            elif not rec["images"]:
                rec["error"] = "finished without an image (worker lost or failed)"
            else:
                rec["error"] = None
            if rec["error"]:
                todo.append(i)
                log(f"  job {i} attempt {attempt + 1}: {rec['error']}")
        if not todo:
            break
    return records


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Queue prompts on a running ComfyUI server.")
    ap.add_argument("workflow", help="API-format workflow JSON (example_workflows/api/*.json)")
    ap.add_argument("--prompts", help="text file, one prompt per line")
    ap.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    ap.add_argument("--seed", type=int, help="seed for job 0; job i gets seed + i")
    ap.add_argument("--server", default="http://127.0.0.1:8188")
    ap.add_argument("--wait", action="store_true", help="wait for each job and report it")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait per job")
    ap.add_argument("--distributed", action="store_true",
                    help="the server is a ComfyUI-Distributed master: load-balance the jobs over "
                         "its workers, wait for all and re-queue lost ones")
    ap.add_argument("--workers", help="with --distributed: comma-separated worker ids "
                                      "(default: the workers enabled in the master's config)")
    ap.add_argument("--retries", type=int, default=2,
                    help="with --distributed: re-queue a job that came back without an image "
                         "at most this many times")
    args = ap.parse_args(argv)
    workflow = json.loads(Path(args.workflow).read_text(encoding="utf-8"))
    if args.distributed:
        return _main_distributed(args, workflow)
    client_id = str(uuid.uuid4())
    for wf in jobs(workflow, load_prompts(args.prompts, args.prompt), args.seed):
        try:
            pid = queue(args.server, wf, client_id)
        except ValueError as err:
            print(f"rejected by the server:\n{err}", file=sys.stderr)
            return 1
        print(f"queued {pid}")
        if args.wait:
            status = wait(args.server, pid, args.timeout).get("status", {})
            print(f"  {pid}: {status.get('status_str', '?')}")
            if status.get("status_str") != "success":
                return 1
    return 0


def _main_distributed(args: argparse.Namespace, workflow: dict) -> int:
    prompts = load_prompts(args.prompts, args.prompt)
    try:
        batch = distributed_jobs(workflow, prompts, args.seed)
        ids = args.workers.split(",") if args.workers else enabled_workers(args.server)
        records = run_distributed(args.server, batch, ids, args.timeout * len(batch),
                                  args.retries)
    except ValueError as err:
        print(f"rejected by the master:\n{err}", file=sys.stderr)
        return 1
    for rec, wf in zip(records, batch, strict=True):
        sampler = next((n["inputs"] for n in wf.values() if n["class_type"] in SAMPLERS), {})
        files = ", ".join(f"{im['subfolder']}/{im['filename']}".lstrip("/")
                          for im in rec["images"])
        print(f"job {rec['index']} seed {sampler.get('seed')} "
              f"{json.dumps(sampler.get('prompt'))}: {rec['error'] or files}")
    lost = [r["index"] for r in records if r["error"]]
    if lost:
        print(f"{len(lost)} of {len(records)} jobs produced no image after "
              f"{args.retries + 1} attempts: {lost}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
