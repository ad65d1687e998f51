"""Our nodes on a loopback ComfyUI-Distributed cluster (skipped unless COMFYUI_PATH and
COMFYUI_DISTRIBUTED_PATH point at checkouts of ComfyUI and robertvoy/ComfyUI-Distributed).

    COMFYUI_PATH=/work/comfyui COMFYUI_DISTRIBUTED_PATH=/work/comfyui-distributed \\
    COMFYUI_PYTHON=/work/comfy-venv/bin/python .venv/bin/python -m pytest -q lab/tests/host/test_distributed.py

Four CPU servers on 127.0.0.1 (tests/kit/comfy_cluster.py): a master, two workers with the pack and
the engine (enabled), one worker with the engine only (registered, disabled), plus one registered
worker at a port nobody listens on. An image "is" job i's when its pixels equal those of a plain
run (POST /prompt, no distribution) of job i's graph on the master. The last cluster test kills a
worker. The tests at the end need no ComfyUI: queue_prompts' job rewriting, and its re-queueing
against a stand-in master on 127.0.0.1.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from lab.workflows import queue_prompts as qp
from tests.kit.comfy_cluster import Cluster, http, start_cluster
from tests.kit.tiny_checkpoint import write_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[3]
COMFY = os.environ.get("COMFYUI_PATH")
ENGINE = os.environ.get("COMFYUI_DISTRIBUTED_PATH")
_NO_CLUSTER = pytest.mark.skipif(not (COMFY and ENGINE),
                                 reason="set COMFYUI_PATH and COMFYUI_DISTRIBUTED_PATH")


def cluster_test(fn):
    """A test on the loopback cluster: marked `comfyui`, skipped without the two checkouts."""
    return pytest.mark.comfyui(_NO_CLUSTER(fn))
EXAMPLE = ROOT / "example_workflows" / "api" / "ladr_distributed_seed_collector.json"
WORKER_TIMEOUT_S = 10  # the engine's collector gives up on a silent worker after this
COLORS = ["red", "blue", "green", "purple", "orange", "yellow"]
SHAPES = ["circle", "square", "triangle"]


def example() -> dict:
    return json.loads(EXAMPLE.read_text())


def prompts(n: int, offset: int = 0) -> list[str]:
    return [f"a {COLORS[(i + offset) % 6]} {SHAPES[(i + offset) // 6 % 3]}" for i in range(n)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    tmp = tmp_path_factory.mktemp("cluster")
    write_tiny_checkpoint(tmp / "models" / "dimoo" / "tiny-fixture")  # on the master only
    yaml = tmp / "extra_model_paths.yaml"
    yaml.write_text(f"ladr_test:\n  base_path: {tmp / 'models'}\n  lumina_dimoo: dimoo/\n")
    cl = start_cluster(tmp, 4, COMFY, ENGINE, without_pack=(3,), unreachable=1,
                       worker_timeout_s=WORKER_TIMEOUT_S,
                       master_args=["--extra-model-paths-config", str(yaml)])
    try:
        yield cl
    finally:
        cl.stop()


def pixels(port: int, images: list[dict]) -> list[bytes]:
    """RGB bytes of saved images, fetched over /view."""
    import urllib.request

    from PIL import Image

    out = []
    for im in images:
        url = (f"http://127.0.0.1:{port}/view?filename={im['filename']}"
               f"&subfolder={im['subfolder']}&type={im['type']}")
        with urllib.request.urlopen(url, timeout=60) as r:
            out.append(Image.open(io.BytesIO(r.read())).convert("RGB").tobytes())
    return out


def plain_run(port: int, graph: dict) -> list[bytes]:
    """Job graph queued with POST /prompt (no distribution: the collector passes through)."""
    pid = qp.queue(f"http://127.0.0.1:{port}", graph, "reference")
    entry = qp.wait(f"http://127.0.0.1:{port}", pid, 300)
    assert entry["status"]["status_str"] == "success", entry["status"]
    return pixels(port, qp.saved_images(entry, graph))


def distributed_queue(cl: Cluster, graph: dict, workers: list[str]) -> tuple[int, dict]:
    return http(cl.master.port, "/distributed/queue",
                {"prompt": graph, "client_id": "test", "enabled_worker_ids": workers})


def executed(port: int) -> int:
    return len(http(port, "/history")[1])


@cluster_test
def test_parallel_run_one_image_per_participant_with_distinct_reproducible_seeds(cluster):
    """The example as the UI queues it: master seed s, worker i seed s + i + 1, all collected."""
    status, body = distributed_queue(cluster, example(), ["1", "2"])
    assert status == 200 and body["worker_count"] == 2, body
    entry = qp.wait(cluster.master.url, body["prompt_id"], 300)
    got = pixels(cluster.master.port, qp.saved_images(entry, example()))
    assert len(got) == 3 and len(set(got)) == 3
    for k, image in enumerate(got):  # master first, then workers in enabled order
        ref = example()
        ref["7"]["inputs"]["seed"] = 42 + k
        assert plain_run(cluster.master.port, ref) == [image], f"participant {k}"


@cluster_test
def test_twelve_prompts_load_balanced_none_lost_none_duplicated(cluster):
    batch = qp.distributed_jobs(example(), prompts(12), seed=100)
    before = [executed(s.port) for s in cluster.servers[1:3]]
    records = qp.run_distributed(cluster.master.url, batch, ["1", "2"], timeout=900, retries=0)
    assert [r["error"] for r in records] == [None] * 12
    assert all(len(r["images"]) == 1 and len(r["prompt_ids"]) == 1 for r in records)
    got = [pixels(cluster.master.port, r["images"])[0] for r in records]
    assert len({r["images"][0]["filename"] for r in records}) == 12 and len(set(got)) == 12
    ran = [executed(s.port) - b for s, b in zip(cluster.servers[1:3], before, strict=True)]
    assert all(n >= 1 for n in ran), f"work was not spread: worker runs {ran}"
    for i, (job, image) in enumerate(zip(batch, got, strict=True)):
        assert job["3"]["inputs"]["seed"] == 100 + i and "7" not in job
        assert job["3"]["inputs"]["prompt"] == prompts(12)[i]
        assert plain_run(cluster.master.port, job) == [image], f"job {i}"


@cluster_test
def test_worker_without_the_pack_is_refused_naming_the_missing_node(cluster):
    status, body = distributed_queue(cluster, example(), ["3"])
    assert status == 500, body
    # The first of our nodes the worker checks is named (by title) with its class_type.
    assert "not found. The custom node may not be installed" in body["error"], body
    assert re.search(r"'class_type': 'LADR_\w+'", body["error"]), body


@cluster_test
def test_worker_without_the_model_gets_the_loaders_message(cluster):
    graph = example()  # the tiny fixture checkpoint exists on the master only
    graph["1"]["inputs"].update(model_name="tiny-fixture", dtype="fp32")
    graph["3"]["inputs"].update(steps=8)
    canvas = next(n for n in graph.values() if n["class_type"] == "LADR_Canvas")
    canvas["inputs"].update(width=32, height=32)
    status, body = distributed_queue(cluster, graph, ["1"])
    assert status == 500, body
    assert "tiny-fixture" in body["error"] and "models/lumina_dimoo" in body["error"], body


@cluster_test
def test_unreachable_worker_is_skipped_and_the_others_deliver(cluster):
    graph = example()
    graph["7"]["inputs"]["seed"] = 500
    status, body = distributed_queue(cluster, graph, ["1", "4"])
    assert status == 200 and body["worker_count"] == 1, body
    entry = qp.wait(cluster.master.url, body["prompt_id"], 300)
    assert len(qp.saved_images(entry, graph)) == 2  # master + the reachable worker
    assert "(4) is offline, skipping" in cluster.master.runtime_log()


def _kill_when_busy(cluster: Cluster, victim_index: int, killed: list) -> None:
    victim = cluster.servers[victim_index]
    end = time.monotonic() + 300
    while time.monotonic() < end:
        status, q = http(victim.port, "/queue", timeout=10)
        if status == 200 and q.get("queue_running"):
            killed.append(len(q["queue_running"]) + len(q.get("queue_pending", [])))
            victim.kill()
            return
        time.sleep(0.1)


@cluster_test
def test_worker_killed_mid_queue_its_jobs_are_requeued_and_complete(cluster):
    """Engine alone: after the worker timeout the master's Collector hands an EMPTY batch to
    Save Image, which fails with an IndexError: the job is reported as failed, without an image
    and without naming the worker (only the master's log says 'Heartbeat timeout').
    queue_prompts --distributed queues such a job again; the engine skips the dead worker."""
    batch = qp.distributed_jobs(example(), prompts(8, offset=3), seed=300)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_busy, args=(cluster, 2, killed))
    killer.start()
    log: list[str] = []
    records = qp.run_distributed(cluster.master.url, batch, ["1", "2"], timeout=900,
                                 retries=2, log=log.append)
    killer.join(timeout=330)
    assert killed and not cluster.servers[2].alive(), "worker2 was never busy"
    requeued = [r for r in records if len(r["prompt_ids"]) > 1]
    assert requeued, f"no job was lost although worker2 died with {killed[0]} queued"
    for r in requeued:  # the engine's answer for the lost attempt
        first = qp.wait(cluster.master.url, r["prompt_ids"][0], 10)
        assert first["status"]["status_str"] == "error"
        assert not qp.saved_images(first, batch[r["index"]])
    assert any("out of bounds for dimension 0 with size 0" in line for line in log), log
    assert "Heartbeat timeout" in cluster.master.runtime_log()
    assert [r["error"] for r in records] == [None] * len(batch)
    got = [pixels(cluster.master.port, r["images"]) for r in records]
    assert all(len(g) == 1 for g in got) and len({g[0] for g in got}) == len(batch)
    for i, job in enumerate(batch):
        ref = copy.deepcopy(job)
        assert plain_run(cluster.master.port, ref) == got[i], f"job {i}"


# ----------------------------------------------------------------- without ComfyUI: the script


def test_distributed_jobs_pin_seeds_and_switch_on_load_balance():
    wf = example()
    batch = qp.distributed_jobs(wf, ["a cat", "a dog"], seed=None)
    assert [j["3"]["inputs"]["seed"] for j in batch] == [42, 42]  # the Distributed Seed's value
    batch = qp.distributed_jobs(wf, ["a cat", "a dog"], seed=7)
    for i, job in enumerate(batch):
        assert job["3"]["inputs"]["seed"] == 7 + i and job["3"]["inputs"]["prompt"] == \
            ["a cat", "a dog"][i]
        assert job["5"]["inputs"]["load_balance"] is True and "7" not in job
    assert wf == example()  # the template is not mutated
    with pytest.raises(ValueError, match="no DistributedCollector"):
        qp.distributed_jobs(json.loads((ROOT / "example_workflows" / "api" /
                                        "ladr_nano_text_to_image.json").read_text()), ["x"], 1)


class FakeMaster:
    """A stand-in master on 127.0.0.1: /distributed/queue + /history, where the first attempt of
    the seeds in `lose_once` ends 'success' with no image (as the engine reports a dead worker),
    seeds in `fail` end with an execution error, and the first queueing of a seed in
    `refuse_once` is answered with HTTP 500 and that message (as the master answers when a
    worker dies while the job is sent to it, or when it rejects a workflow)."""

    def __init__(self, lose_once: set[int], fail: set[int] = frozenset(),
                 refuse_once: dict[int, str] | None = None) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.entries: dict[str, dict] = {}
        self.queued: list[int] = []
        self.refused: list[int] = []
        master = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, body: dict, code: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seed = body["prompt"]["3"]["inputs"]["seed"]
                if seed in (refuse_once or {}) and seed not in master.refused:
                    master.refused.append(seed)
                    self._send({"error": refuse_once[seed]}, 500)
                    return
                pid = f"p{len(master.queued)}"
                lost = seed in lose_once and seed not in master.queued
                master.queued.append(seed)
                status = {"status_str": "success", "completed": True, "messages": []}
                outputs = {} if lost else {"6": {"images": [
                    {"filename": f"{seed}.png", "subfolder": "", "type": "output"}]}}
                if seed in fail:
                    status = {"status_str": "error", "completed": False, "messages": [
                        ["execution_error", {"exception_message": f"boom {seed}"}]]}
                    outputs = {}
                master.entries[pid] = {"status": status, "outputs": outputs}
                self._send({"prompt_id": pid, "number": 0, "node_errors": {}})

            def do_GET(self) -> None:
                pid = self.path.rsplit("/", 1)[-1]
                self._send({pid: master.entries[pid]} if pid in master.entries else {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeMaster:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_run_distributed_requeues_a_job_that_came_back_without_an_image():
    batch = qp.distributed_jobs(example(), prompts(4), seed=300)
    log: list[str] = []
    with FakeMaster(lose_once={301}) as master:
        records = qp.run_distributed(master.url, batch, ["1"], timeout=60, retries=2,
                                     log=log.append)
    assert master.queued == [300, 301, 302, 303, 301]  # only the lost job went again
    assert [r["error"] for r in records] == [None] * 4
    assert [len(r["prompt_ids"]) for r in records] == [1, 2, 1, 1]
    assert [r["images"][0]["filename"] for r in records] == [f"{s}.png" for s in range(300, 304)]
    assert log == ["  job 1 attempt 1: finished without an image (worker lost or failed)"]


LOST_WORKER_ANSWERS = (  # the master's answers seen when a worker died as its job was sent
    "Cannot connect to host 127.0.0.1:5 ssl:default [Connect call failed]",
    "Worker websocket closed before dispatch_ack was received.",
    "[Errno 104] Connection reset by peer")


@pytest.mark.parametrize("gone", LOST_WORKER_ANSWERS)
def test_a_job_refused_because_a_worker_just_died_is_queued_again(gone):
    """A worker that dies while the batch is being queued: the master answers that it cannot
    connect, or that the socket closed before the worker acknowledged the job, for the job it
    was sending there; that attempt is lost, not the whole run."""
    batch = qp.distributed_jobs(example(), prompts(3), seed=300)
    assert not qp.is_rejection(gone)
    log: list[str] = []
    with FakeMaster(lose_once=set(), refuse_once={301: gone}) as master:
        records = qp.run_distributed(master.url, batch, ["1"], timeout=60, retries=1,
                                     log=log.append)
    assert master.refused == [301] and master.queued == [300, 302, 301]
    assert [r["error"] for r in records] == [None] * 3
    assert [len(r["prompt_ids"]) for r in records] == [1, 1, 1]
    assert log == [f"  job 1 attempt 1: not queued: {gone}"]
    with FakeMaster(lose_once=set(), refuse_once={300: gone}) as master:  # out of retries
        records = qp.run_distributed(master.url, batch[:1], ["1"], timeout=60, retries=0,
                                     log=lambda _: None)
    assert records[0]["error"] == f"not queued: {gone}" and not records[0]["prompt_ids"]


REJECTIONS = (  # the master's own validation failure; a worker's negative acknowledgement
    "Prompt outputs failed validation",
    "Worker rejected websocket dispatch. | validation_error={'type': 'x'}")


@pytest.mark.parametrize("refusal", REJECTIONS)
def test_a_workflow_the_master_rejects_still_stops_the_run(refusal):
    batch = qp.distributed_jobs(example(), prompts(2), seed=300)
    with FakeMaster(lose_once=set(), refuse_once={301: refusal}) \
            as master, pytest.raises(ValueError, match=re.escape(refusal)):
        qp.run_distributed(master.url, batch, ["1"], timeout=60, retries=2, log=lambda _: None)
    assert master.queued == [300]


def test_run_distributed_reports_what_never_produced_an_image():
    batch = qp.distributed_jobs(example(), prompts(3), seed=300)
    with FakeMaster(lose_once={300}, fail={302}) as master:
        records = qp.run_distributed(master.url, batch, ["1"], timeout=60, retries=0,
                                     log=lambda _: None)
    assert records[0]["error"] == "finished without an image (worker lost or failed)"
    assert records[1]["error"] is None
    assert records[2]["error"].startswith("failed: boom 302 (if a worker died")
    assert master.queued == [300, 301, 302]  # retries=0: nothing went again
