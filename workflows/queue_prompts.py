"""Queue a list of prompts against a running ComfyUI server's /prompt API (stdlib only).

    python workflows/queue_prompts.py workflows/api/ladr_nano_text_to_image.json \
        --prompts prompts.txt --server http://127.0.0.1:8188 --wait

Each non-empty line of the prompts file (or each --prompt) becomes one queued job: the workflow
(API format) with every DiMOO Sampler's `prompt` replaced and, with --seed, its seed set to
seed + job index. Without prompts the workflow is queued once as it is. A validation error from
the server (bad size, missing model folder, ...) is printed per node and the script exits 1.
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

SAMPLER = "LADR_DiMOOSampler"


def load_prompts(path: str | None, inline: list[str]) -> list[str]:
    """Prompt lines from a file (blank lines and lines starting with # skipped) + --prompt."""
    lines = list(inline)
    if path:
        text = Path(path).read_text(encoding="utf-8")
        lines += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return lines


def jobs(workflow: dict, prompts: list[str], seed: int | None) -> list[dict]:
    """One API-format workflow per prompt (the workflow itself when there are no prompts)."""
    samplers = [k for k, n in workflow.items() if n.get("class_type") == SAMPLER]
    if prompts and not samplers:
        raise ValueError(f"workflow has no {SAMPLER} node to put the prompts into")
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Queue prompts on a running ComfyUI server.")
    ap.add_argument("workflow", help="API-format workflow JSON (workflows/api/*.json)")
    ap.add_argument("--prompts", help="text file, one prompt per line")
    ap.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    ap.add_argument("--seed", type=int, help="seed for job 0; job i gets seed + i")
    ap.add_argument("--server", default="http://127.0.0.1:8188")
    ap.add_argument("--wait", action="store_true", help="wait for each job and report it")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait per job")
    args = ap.parse_args(argv)
    workflow = json.loads(Path(args.workflow).read_text(encoding="utf-8"))
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


if __name__ == "__main__":
    raise SystemExit(main())
