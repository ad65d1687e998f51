"""A loopback ComfyUI-Distributed cluster for tests and benchmarks: N CPU ComfyUI servers.

Each server is `main.py --cpu` on its own free 127.0.0.1 port with its own temporary
--base-directory whose custom_nodes/ holds a link to this repository (unless `with_pack=False`)
and a COPY of the ComfyUI-Distributed engine: the engine keeps its worker list in a
`gpu_config.json` beside its own code, so every server needs its own copy (the master's lists
the workers; a worker's stays empty). Servers run with 1 torch thread; workers get
COMFYUI_IS_WORKER=1, as the engine's own worker launcher sets. Every wait is bounded; `stop()`
ends only the processes started here, by PID.

Used by lab/tests/host/test_distributed.py and lab/benchmarks/scale_out.py (stdlib only).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = "ComfyUI-Distributed"
_SKIP = shutil.ignore_patterns(".git", "node_modules", "tests", "*.pyc", "__pycache__",
                               "gpu_config.json")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(port: int, route: str, payload: dict | None = None,
         timeout: float = 60.0) -> tuple[int, dict]:
    """GET (payload None) or POST JSON to 127.0.0.1:port; returns (status, parsed body)."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
            return r.status, json.loads(body) if body else {}
    except urllib.error.HTTPError as err:
        raw = err.read() or b"{}"
        try:
            return err.code, json.loads(raw)
        except ValueError:
            return err.code, {"error": raw.decode(errors="replace")}


@dataclass
class Server:
    """One started ComfyUI process."""

    name: str
    port: int
    base: Path
    proc: subprocess.Popen
    log_path: Path
    engine_config: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def runtime_log(self) -> str:
        """The server's in-memory log (the engine's GET /distributed/local_log). Unlike the log
        file it holds prints from custom nodes at once (ComfyUI block-buffers its stdout)."""
        return http(self.port, "/distributed/local_log?lines=3000")[1].get("content", "")

    def kill(self) -> None:
        """SIGKILL this server (a crashed worker): only this PID, then reap it."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@dataclass
class Cluster:
    """Servers[0] is the master; servers[1:] are its workers with engine ids "1", "2", ..."""

    servers: list[Server] = field(default_factory=list)

    @property
    def master(self) -> Server:
        return self.servers[0]

    def worker_id(self, server: Server) -> str:
        """The engine's id of a worker server (its index)."""
        return str(self.servers.index(server))

    def stop(self) -> None:
        for s in self.servers:
            if s.alive():
                s.proc.terminate()
        for s in self.servers:
            try:
                s.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                s.kill()


def _start(name: str, base: Path, comfy: Path, python: str, worker: bool,
           extra_args: list[str]) -> Server:
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if worker:
        env["COMFYUI_IS_WORKER"] = "1"
    log_path = base / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [python, "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(port),
             "--base-directory", str(base), "--database-url", "sqlite:///:memory:",
             *extra_args], cwd=comfy, stdout=log, stderr=subprocess.STDOUT, env=env)
    return Server(name, port, base, proc, log_path,
                  base / "custom_nodes" / ENGINE_DIR / "gpu_config.json")


def _wait_ready(server: Server, node: str, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and server.alive():
        try:
            if http(server.port, f"/object_info/{node}", timeout=5)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{server.name} on port {server.port} did not come up within "
                       f"{timeout:.0f} s:\n{server.log_tail()}")


def engine_config(workers: list[tuple[str, int, bool]], worker_timeout_s: int) -> dict:
    """The master's gpu_config.json from (name, port, enabled) per worker; ids "1", "2", ...
    Workers are the "local" type: they call the master back on 127.0.0.1."""
    return {
        "master": {"host": "127.0.0.1"},
        "workers": [{"id": str(i), "name": name, "host": "127.0.0.1", "port": port,
                     "type": "local", "enabled": enabled}
                    for i, (name, port, enabled) in enumerate(workers, 1)],
        "settings": {"debug": False, "auto_launch_workers": False,
                     "stop_workers_on_master_exit": False, "master_delegate_only": False,
                     "worker_timeout_seconds": worker_timeout_s},
    }


def start_cluster(tmp: Path, n_servers: int, comfy: str, engine: str,
                  python: str | None = None, without_pack: tuple[int, ...] = (),
                  unreachable: int = 0, worker_timeout_s: int = 20,
                  startup_timeout: float = 600.0, master_args: list[str] | None = None) -> Cluster:
    """Start `n_servers` (master + n-1 workers, enabled in the master's config). Servers in
    `without_pack` (indices) get the engine but not this pack and are registered disabled;
    `unreachable` more disabled workers point at free ports nobody listens on. Raises
    RuntimeError (and stops what it started) on failure."""
    python = python or os.environ.get("COMFYUI_PYTHON", sys.executable)
    cluster = Cluster()
    try:
        for i in range(n_servers):
            base = tmp / ("master" if i == 0 else f"worker{i}")
            nodes = base / "custom_nodes"
            nodes.mkdir(parents=True)
            shutil.copytree(engine, nodes / ENGINE_DIR, ignore=_SKIP)
            if i not in without_pack:
                (nodes / "ComfyUI-LADR").symlink_to(ROOT)
            cluster.servers.append(_start("master" if i == 0 else f"worker{i}", base,
                                          Path(comfy), python, i > 0,
                                          (master_args or []) if i == 0 else []))
        for i, s in enumerate(cluster.servers):
            ready_node = "DistributedCollector" if i in without_pack else "LADR_DiMOOSampler"
            _wait_ready(s, ready_node, startup_timeout)
        workers = [(s.name, s.port, i not in without_pack)
                   for i, s in enumerate(cluster.servers[1:], 1)]
        workers += [(f"nobody{k}", free_port(), False) for k in range(unreachable)]
        config = engine_config(workers, worker_timeout_s)
        cluster.master.engine_config.write_text(json.dumps(config, indent=2))
        status, body = http(cluster.master.port, "/distributed/config")
        got = [w["port"] for w in body.get("workers", [])]
        if status != 200 or got != [port for _, port, _ in workers]:
            raise RuntimeError(f"the master did not read its worker list: {status} {body}")
    except BaseException:
        cluster.stop()
        raise
    return cluster
