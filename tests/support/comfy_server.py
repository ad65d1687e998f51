"""A real ComfyUI server for the host and frontend tests: start one, talk to it over HTTP and
its websocket, queue the shipped API workflows (re-pointed at the fixture checkpoint where the
nano model is not shipped).

COMFYUI_PATH names the ComfyUI checkout (scripts/host.sh builds one); COMFYUI_PYTHON its python.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from support import ROOT

COMFY = os.environ.get("COMFYUI_PATH")
NANO_READY = (ROOT / "ladr_core" / "assets" / "dimoo_nano" / "config.json").is_file()


class WS:
    """Minimal RFC 6455 client for ComfyUI's /ws (text frames parsed, binary previews skipped)."""

    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws?clientId={client_id} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: "
                           f"{key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("websocket closed")
            buf += chunk
        return buf

    def recv(self) -> dict | None:
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(self._read(2), "big")
        elif n == 127:
            n = int.from_bytes(self._read(8), "big")
        data = self._read(n)
        if b0 & 0x0F == 1:
            return json.loads(data)
        return binary_preview(data) if b0 & 0x0F == 2 else None

    def until_done(self, prompt_id: str, on_msg=None) -> list[dict]:
        msgs: list[dict] = []
        while True:
            m = self.recv()
            if m is None:  # a binary frame that is not a preview (e.g. text)
                msgs.append({"type": "binary"})
                continue
            msgs.append(m)
            if on_msg:
                on_msg(m)
            d = m.get("data", {})
            if m["type"] in ("execution_error", "execution_interrupted") and \
                    d.get("prompt_id") == prompt_id:
                return msgs
            if m["type"] == "executing" and d.get("node") is None and \
                    d.get("prompt_id") == prompt_id:
                return msgs


def binary_preview(data: bytes) -> dict | None:
    """ComfyUI's progress-bar preview frame (protocol.BinaryEventTypes) -> {"type": "preview",
    "data": {"image": bytes, "node": id or None}}; other binary frames -> None."""
    event = int.from_bytes(data[:4], "big")
    if event == 1:  # PREVIEW_IMAGE: image type (1 JPEG, 2 PNG) then the bytes
        return {"type": "preview", "data": {"image": data[8:], "node": None}}
    if event == 4:  # PREVIEW_IMAGE_WITH_METADATA: metadata length, JSON metadata, bytes
        size = int.from_bytes(data[4:8], "big")
        meta = json.loads(data[8:8 + size])
        return {"type": "preview", "data": {"image": data[8 + size:],
                                            "node": meta.get("node_id")}}
    return None


def http(port: int, route: str, payload: dict | None = None) -> tuple[int, dict]:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read()
            return r.status, json.loads(body) if body else {}
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


STARTUP_S = 600
"""How long a server may take to answer: about 15 s on an idle machine, minutes on a loaded one
(two test workers each start one, beside other work)."""


def _wait_ready(proc: subprocess.Popen, port: int, base: Path) -> bool:
    """True once the server answers with this pack's nodes and is this one (its argv names
    `base`: another worker's server that took the same free port would not); False if it
    exits or the STARTUP_S deadline passes first."""
    deadline = time.monotonic() + STARTUP_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if http(port, "/object_info/LADR_DiMOOSampler")[0] == 200:
                status, stats = http(port, "/system_stats")
                if status == 200 and str(base) in stats.get("system", {}).get("argv", []):
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


PORT_TRIES = 3
"""A free port can be taken by another process between the probe and the server's bind: the
server then exits saying so, and is started again on another port."""


def _launch(base: Path, yaml: Path) -> tuple[subprocess.Popen, int, Any]:
    """A server process on a port that was free a moment ago: (process, port, open log)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    py = os.environ.get("COMFYUI_PYTHON", sys.executable)
    log = open(base / "server.log", "w")  # noqa: SIM115 - closed by _stop
    proc = subprocess.Popen([py, "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(port),
                             "--base-directory", str(base), "--extra-model-paths-config",
                             str(yaml), "--database-url", "sqlite:///:memory:"],
                            cwd=COMFY, stdout=log, stderr=subprocess.STDOUT)
    return proc, port, log


def _stop(proc: subprocess.Popen, log: Any) -> None:
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@contextlib.contextmanager
def started_server(base: Path):
    """A ComfyUI server on a free port with this pack linked in and the tiny fixture checkpoint
    in an extra model folder; yields (port, base) and stops the server on exit."""
    (base / "custom_nodes").mkdir()
    (base / "custom_nodes" / "ComfyUI-LADR").symlink_to(ROOT)
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    write_tiny_checkpoint(base / "extra_models" / "dimoo" / "tiny-fixture")
    yaml = base / "extra_model_paths.yaml"
    yaml.write_text(f"ladr_test:\n  base_path: {base / 'extra_models'}\n  lumina_dimoo: dimoo/\n")
    for attempt in range(1, PORT_TRIES + 1):
        proc, port, log = _launch(base, yaml)
        try:
            ready = _wait_ready(proc, port, base)
        except BaseException:
            _stop(proc, log)
            raise
        if ready:
            break
        why = "exited" if proc.poll() is not None else f"did not answer in {STARTUP_S} s"
        _stop(proc, log)
        text = (base / "server.log").read_text()
        if "address already in use" not in text.lower() or attempt == PORT_TRIES:
            raise AssertionError(f"the ComfyUI server {why}; the end of its log:\n" + text[-3000:])
    try:
        yield port, base
    finally:
        _stop(proc, log)


def api_workflow(name: str) -> dict:
    wf = json.loads((ROOT / "example_workflows" / "api" / f"{name}.json").read_text())
    if not NANO_READY:  # run the same graph on the fixture checkpoint (VQ factor 4, ctx 256)
        for node in wf.values():
            if node["class_type"] == "LADR_LoadDiMOOModel":
                node["inputs"]["model_name"] = "tiny-fixture"
            if node["class_type"] in ("LADR_Canvas", "LADR_DiMOOSampler"):
                node["inputs"].update(width=32, height=32)
            if node["class_type"] in ("LADR_DiMOOSampler2", "LADR_DiMOOSampler"):
                node["inputs"].update(steps=8)
    return wf


def run_workflow(port: int, wf: dict, on_msg=None) -> tuple[str, list[dict]]:
    cid = str(uuid.uuid4())
    ws = WS(port, cid)
    try:
        status, body = http(port, "/prompt", {"prompt": wf, "client_id": cid})
        assert status == 200, body
        return body["prompt_id"], ws.until_done(body["prompt_id"], on_msg)
    finally:
        ws.sock.close()
