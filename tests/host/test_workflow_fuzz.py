"""Shared workflows with damaged widget values, queued on a real ComfyUI 0.33 server
(skipped without COMFYUI_PATH).

A workflow from a forum can carry anything in any widget. Every widget (INT, FLOAT, STRING,
BOOLEAN, COMBO, read from the live /object_info) of every node of this pack, in the first
shipped API workflow holding it (example_workflows/api/, then the saved ones of earlier
versions for the legacy nodes) or else grafted into one (`grafted`), gets each value such a
file can hold (`values`): the wrong type (a number or a string, a list as the frontend wraps
one, an object, null), no value, NaN and +-infinity, +-2**70, a 1 MB string and an unknown
choice. Each prompt is queued on the running server and must end in one of:

- refused at validation: HTTP 400, errors on that node only, ONE message (a message ComfyUI
  attaches to several inputs counts once, nodes/validate.py) on that input;
- refused when its node runs: one execution_error, from that node;
- run to the end: only where the host turns the value into a valid one (any text for a
  STRING, any value for a BOOLEAN) or the input is optional and takes its default.

A refusal's message starts with the input's name, or with the node's and then the input's
(`Target.named_first`): no bare Python exception. Each case has a time bound (a hang fails);
the server must answer after each one, and after each node's cases the good workflow, with a
fresh seed so that it really runs, must end with its outputs in /history. The bases run here on
CPU: the shipped nano workflows as they are, the real-model ones on the built-in nano at its
default size, the edit one on the tiny fixture checkpoint with its picture scaled to fit that
checkpoint's context (nano cannot edit).
"""

from __future__ import annotations

import collections
import json
import math
import re
import time
import uuid
from typing import NamedTuple

import pytest
from support import ROOT
from support.comfy_server import COMFY, NANO_READY, WS, http

pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not COMFY, reason="set COMFYUI_PATH to a ComfyUI checkout"),
              pytest.mark.skipif(not NANO_READY, reason="needs the shipped dimoo-nano model")]

WIDGETS = ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO")
MISSING = object()  # the key removed from the prompt
CASE_SECONDS = 60  # one case, queued to its end
BASES = [ROOT / "example_workflows" / "api",  # the shipped workflows, then earlier versions'
         *sorted((ROOT / "tests" / "saved_workflows").glob("*/api"))]
NANO, TINY = "dimoo-nano (built-in)", "tiny-fixture"
TINY_PX = 32  # the tiny fixture checkpoint's context holds a 32 x 32 px picture


def values(kind: str) -> list[tuple[str, object]]:
    """The damaged values a workflow file can give a widget of this kind. The host hands a
    STRING or BOOLEAN widget str() / bool() of anything, so those get one number (NaN), the
    others every extreme one."""
    out = [("wrong type", 7 if kind in ("STRING", "COMBO") else "seven"),
           ("list", {"__value__": [1, 2]}), ("object", {"a": 1}), ("null", None),
           ("missing", MISSING), ("nan", math.nan)]
    if kind not in ("STRING", "BOOLEAN"):
        out += [("inf", math.inf), ("-inf", -math.inf), ("huge int", 2**70),
                ("-huge int", -2**70)]
    if kind in ("STRING", "COMBO"):
        out.append(("1 MB string", "x" * 2**20))
    if kind == "COMBO":
        out.append(("unknown choice", "no such choice"))
    return out


def may_run(kind: str, label: str, required: bool) -> bool:
    """Whether the host makes a valid value of this one (str() / bool() of anything, an
    optional input's default); everything else must be refused."""
    if label == "missing":
        return not required
    return kind in ("STRING", "BOOLEAN")


def kind_of(spec: list) -> str:
    """An input's widget kind from /object_info (a V1 COMBO lists its options first)."""
    return "COMBO" if isinstance(spec[0], list) else spec[0]


def choices(spec: list) -> list:
    """A COMBO's options: V1 nodes list them first, V3 nodes as "options"."""
    return spec[0] if isinstance(spec[0], list) else spec[1].get("options", [])


def inputs_of(info: dict, class_type: str) -> dict[str, tuple[list, bool]]:
    """Every input of a node: name -> (spec, required)."""
    live = info[class_type]["input"]
    return {**{k: (v, False) for k, v in live.get("optional", {}).items()},
            **{k: (v, True) for k, v in live.get("required", {}).items()}}


def ours(info: dict) -> set[str]:
    return {k for k, v in info.items() if v.get("python_module", "").endswith("ComfyUI-LADR")}


def runnable(wf: dict, info: dict) -> dict | None:
    """The workflow made to run here on CPU (None: it needs nodes this host lacks)."""
    if any(n["class_type"] not in info for n in wf.values()):
        return None
    edits = [n for n in wf.values() if n["class_type"] == "LADR_DiMOOEdit"]
    for node in wf.values():
        spec = inputs_of(info, node["class_type"]).get("model_name", (None,))[0]
        if spec is not None and node["inputs"]["model_name"] not in choices(spec):
            node["inputs"].update(model_name=TINY if edits else NANO, dtype="auto")
            for other in wf.values():  # 0 x 0: the checkpoint's default size
                if {"width", "height"} <= set(inputs_of(info, other["class_type"])) and \
                        other["class_type"] in ours(info):
                    other["inputs"].update(width=0, height=0)
    for key, node in [(k, n) for k, n in wf.items() if n["class_type"] == "LADR_DiMOOEdit"]:
        scale = str(max(int(k) for k in wf) + 1)  # the picture at the tiny context's size
        wf[scale] = {"class_type": "ImageScale", "inputs": {
            "image": node["inputs"]["image"], "upscale_method": "area", "width": TINY_PX,
            "height": TINY_PX, "crop": "center"}}
        wf[key]["inputs"].update(image=[scale, 0], size="as is", steps=8)
    return wf


def workflows(info: dict) -> list[dict]:
    """Every workflow that runs here, in BASES order, the shortest file first (the fewest
    prompts to run)."""
    paths = [p for folder in BASES
             for p in sorted(folder.glob("*.json"), key=lambda p: (p.stat().st_size, p.name))]
    return [wf for p in paths if (wf := runnable(json.loads(p.read_text()), info)) is not None]


def upstream(wf: dict, key: str) -> set[str]:
    """`key` and every node it takes a link from, directly or not."""
    seen, todo = set(), [key]
    while todo:
        k = todo.pop()
        if k not in seen:
            seen.add(k)
            todo += [v[0] for v in wf[k]["inputs"].values() if isinstance(v, list)]
    return seen


def grafted(info: dict, wf: dict, class_type: str) -> dict | None:
    """`wf` with a `class_type` node added (None where `wf` cannot hold it): its output into the
    first input of that type (e.g. Prophet Policy into a rule's policy), else into one taking
    any type (Preview Any), its sockets fed by nodes of `wf` that output those types and do not
    depend on that input's node, its required widgets at their defaults."""
    new, outputs = str(max(int(k) for k in wf) + 1), info[class_type]["output"]
    slots = [(key, name, outputs.index(spec[0]) if spec[0] in outputs else 0)
             for wanted in (outputs, ["*"]) for key, node in wf.items()
             for name, (spec, _) in inputs_of(info, node["class_type"]).items()
             if kind_of(spec) not in WIDGETS and spec[0] in wanted]
    for key, name, slot in slots:
        inputs = fed(info, {k: n for k, n in wf.items() if key not in upstream(wf, k)},
                     class_type)
        if inputs is not None:
            out = json.loads(json.dumps(wf))
            out[key]["inputs"][name] = [new, slot]
            return {**out, new: {"class_type": class_type, "inputs": inputs}}
    return None


def fed(info: dict, sources: dict, class_type: str) -> dict | None:
    """A `class_type` node's required inputs: widgets at their defaults, sockets linked to the
    first of `sources` with an output of that type (None: a socket no source feeds)."""
    inputs = {}
    for name, (spec, required) in inputs_of(info, class_type).items():
        if required and kind_of(spec) in WIDGETS:
            inputs[name] = spec[1].get("default", (choices(spec) or [None])[0])
        elif required:
            feeds = [[k, info[n["class_type"]]["output"].index(spec[0])]
                     for k, n in sources.items() if spec[0] in info[n["class_type"]]["output"]]
            if not feeds:
                return None
            inputs[name] = feeds[0]
    return inputs


class Plan(NamedTuple):
    """A node to fuzz: the workflow holding it, the good one to run after its cases, and
    whether it was grafted in (then only the values that must be refused: a run of it is not
    what its good workflow shows, and LADR Calibrate's measures for minutes)."""

    wf: dict
    good: dict
    grafted: bool


def plans(info: dict) -> dict[str, Plan]:
    """class_type -> its plan, for every node of this pack: the first workflow holding it, else
    the first that can hold it grafted in."""
    out: dict[str, Plan] = {}
    runs = workflows(info)
    for wf in runs:
        for node in wf.values():
            if node["class_type"] in ours(info):
                out.setdefault(node["class_type"], Plan(wf, wf, False))
    for class_type in sorted(ours(info) - set(out)):
        for wf in runs:
            if (holding := grafted(info, wf, class_type)) is not None:
                out[class_type] = Plan(holding, wf, True)
                break
    return out


class Server:
    """The running server, followed on one websocket through every case."""

    def __init__(self, port: int) -> None:
        self.port, self.cid = port, str(uuid.uuid4())
        self.ws = WS(port, self.cid)
        self.ws.sock.settimeout(CASE_SECONDS)
        self.seed = 10_000

    def queue(self, wf: dict) -> tuple[int, dict, list[dict]]:
        """POST /prompt; an accepted prompt is followed on the websocket to its end."""
        status, body = http(self.port, "/prompt", {"prompt": wf, "client_id": self.cid})
        if status != 200:
            return status, body, []
        return status, body, self.ws.until_done(body["prompt_id"])

    def alive(self) -> bool:
        try:
            return http(self.port, "/system_stats")[0] == 200
        except OSError:
            return False

    def good_run(self, wf: dict, info: dict) -> bool:
        """The good workflow with a fresh seed runs to its outputs (nothing served cached)."""
        wf = json.loads(json.dumps(wf))
        self.seed += 1
        for node in wf.values():
            for name, (spec, _) in inputs_of(info, node["class_type"]).items():
                if len(spec) > 1 and spec[1].get("control_after_generate"):
                    node["inputs"][name] = self.seed
        status, body, msgs = self.queue(wf)
        if status != 200 or msgs[-1]["type"] != "executing":
            return False
        _, hist = http(self.port, f"/history/{body['prompt_id']}")
        outputs = {k for k, n in wf.items() if info[n["class_type"]]["output_node"]}
        entry = hist[body["prompt_id"]]
        return entry["status"]["status_str"] == "success" and outputs <= set(entry["outputs"])


class Target(NamedTuple):
    """The damaged widget: its node's id in the prompt, its name, the node's display name."""

    node: str
    name: str
    title: str

    def named_first(self, text: str) -> bool:
        """The message starts with the input's name, or with the node's name and then it
        (the pack's "<node>: <input> <problem>; <fix>", ComfyUI's "<input>, <value>, ...")."""
        head, _, rest = text.partition(": ")
        if rest and self.title.startswith(head):
            text = rest
        return re.match(rf"{re.escape(self.name)}(?!\w)", text) is not None


def refused_at_validation(body: dict, at: Target) -> str | None:
    """None when the answer's node errors are one message on the node's input, naming it;
    else why not (a message ComfyUI attaches to each input validate_inputs names counts
    once)."""
    errors = body.get("node_errors", {})
    if set(errors) != {at.node}:
        return f"errors on nodes {sorted(errors)}: {json.dumps(body)[:400]}"
    listed = errors[at.node]["errors"]
    on = {e.get("extra_info", {}).get("input_name") for e in listed}
    texts = {(e["message"], re.sub(r"^[\w.]+ - ", "", e["details"], count=1)) for e in listed}
    if at.name not in on or len(texts) != 1:
        return f"{len(texts)} messages on {sorted(map(str, on))}: {json.dumps(listed)[:400]}"
    message, details = texts.pop()
    return None if at.named_first(details) else f"not named first: {message}: {details[:300]}"


def refused_when_run(msgs: list[dict], at: Target) -> str | None:
    errors = [m["data"] for m in msgs if m["type"] == "execution_error"]
    if len(errors) != 1 or errors[0]["node_id"] != at.node:
        return f"execution errors {[(e['node_id'], e['exception_message']) for e in errors]}"
    message = errors[0]["exception_message"].strip()
    return None if at.named_first(message) else \
        f"{errors[0]['exception_type']}: {message[:300]}"


def outcome(server: Server, wf: dict, at: Target, allowed: bool) -> tuple[str, str]:
    """(outcome, why it is wrong or "") for one damaged prompt."""
    started = time.monotonic()
    try:
        status, body, msgs = server.queue(wf)
    except OSError as err:  # the websocket timed out or the server went away
        return "hung or died", f"{type(err).__name__} after {time.monotonic() - started:.0f} s"
    if status == 400 or body.get("node_errors"):  # 200: the outputs it does not feed ran
        return "refused at validation", refused_at_validation(body, at) or ""
    if status != 200:
        return f"HTTP {status}", json.dumps(body)[:300]
    if msgs[-1]["type"] == "execution_error":
        return "refused when run", refused_when_run(msgs, at) or ""
    if msgs[-1]["type"] != "executing":
        return msgs[-1]["type"], "neither refused nor run to the end"
    return "ran", "" if allowed else "a damaged value ran"


def cases(info: dict, class_type: str, plan: Plan) -> list[tuple[str, str, object, bool]]:
    """(widget, label, value, may it run) for every widget of a node."""
    out = [(name, label, value, may_run(kind_of(spec), label, required))
           for name, (spec, required) in sorted(inputs_of(info, class_type).items())
           if kind_of(spec) in WIDGETS for label, value in values(kind_of(spec))]
    return [c for c in out if not (plan.grafted and c[3])]


def fuzz(port: int, info: dict) -> tuple[collections.Counter, list[str]]:
    """(outcomes, failures) over every widget of every node, the good workflow run after
    each node's cases."""
    server, tally, failures = Server(port), collections.Counter(), []
    try:
        for class_type, plan in sorted(plans(info).items()):
            node = next(k for k, n in plan.wf.items() if n["class_type"] == class_type)
            for name, label, value, allowed in cases(info, class_type, plan):
                bad = json.loads(json.dumps(plan.wf))
                bad[node]["inputs"].pop(name, None)
                if value is not MISSING:
                    bad[node]["inputs"][name] = value
                at = Target(node, name, info[class_type]["display_name"])
                end, why = outcome(server, bad, at, allowed)
                tally[end] += 1
                if why:
                    failures.append(f"{class_type}.{name} = {label}: {end}: {why}")
                if end == "hung or died" or not server.alive():
                    return tally, [*failures, f"the fuzz stopped at {class_type}.{name}"]
            tally["good runs"] += 1
            if not server.good_run(plan.good, info):
                failures.append(f"{class_type}: the good workflow after its cases failed")
    finally:
        server.ws.sock.close()
    return tally, failures


def test_every_damaged_widget_is_refused_once_on_its_input_and_the_server_runs_on(server) -> None:
    port, _ = server
    _, info = http(port, "/object_info")
    covered = plans(info)
    shipped = {n["class_type"] for p in BASES[0].glob("*.json")
               for n in json.loads(p.read_text()).values()} & ours(info)
    assert not any(covered[c].grafted for c in shipped), "a shipped node in its own workflow"
    assert set(covered) == ours(info), "every node of the pack is fuzzed"
    started = time.monotonic()
    tally, failures = fuzz(port, info)
    print(f"workflow fuzz: {dict(tally)} in {time.monotonic() - started:.0f} s")
    assert not failures, "\n".join(failures[:40]) + f"\n({len(failures)} failures)"
    assert tally.pop("good runs") == len(covered), "a good run after every node's cases"
    assert set(tally) == {"refused at validation", "refused when run", "ran"}, tally
    assert sum(tally.values()) == sum(len(cases(info, c, p)) for c, p in covered.items())


def out_of_range(spec: list) -> list[tuple[str, object]]:
    """A numeric widget's values just past its schema's bounds: (the bound, the value)."""
    extra, step = spec[1], 1 if spec[0] == "INT" else 0.5
    return [(f"min {extra['min']}", extra["min"] - step)] * ("min" in extra) + \
        [(f"max {extra['max']}", extra["max"] + step)] * ("max" in extra)


CANVAS_SIZES = ("LADR_Canvas", ("width", "height"))
"""The one exception (nodes/validate.py rule 2): DiMOO Canvas's validate_inputs names both
sizes, so ComfyUI puts its one message, naming the wrong one, on each."""


def one_message_on(body: dict, at: Target) -> str | None:
    """None when the answer is exactly one error, on this node and this input; else why not
    (strict: unlike `refused_at_validation`, a message on a second input is a failure, but for
    DiMOO Canvas's sizes, `CANVAS_SIZES`: one message on both, naming this input)."""
    errors = body.get("node_errors", {})
    listed = errors.get(at.node, {}).get("errors", [])
    on = [e.get("extra_info", {}).get("input_name") for e in listed]
    sizes = at.title == CANVAS_SIZES[0] and at.name in CANVAS_SIZES[1]
    if set(errors) != {at.node} or on != (list(CANVAS_SIZES[1]) if sizes else [at.name]):
        return f"errors on {sorted(errors)}, inputs {on}: {json.dumps(body)[:300]}"
    texts = {re.sub(r"^[\w.]+ - ", "", e["details"], count=1) for e in listed}
    if sizes and (len(texts) != 1 or f": {at.name}=" not in texts.pop()):
        return f"not one message naming {at.name}: {json.dumps(listed)[:300]}"
    return None


def test_every_numeric_widget_out_of_range_is_one_message_on_that_input(server) -> None:
    """Every INT / FLOAT widget of every node (from the live /object_info) set just
    past its min or max through the API is refused at validation with ONE message, on that
    input alone, saying the bound (a prompt whose other outputs are fine is accepted with that
    node's errors, and what it queued is stopped)."""
    port, _ = server
    _, info = http(port, "/object_info")
    failures, checked = [], 0
    for class_type, plan in sorted(plans(info).items()):
        node = next(k for k, n in plan.wf.items() if n["class_type"] == class_type)
        for name, (spec, _) in sorted(inputs_of(info, class_type).items()):
            for bound, value in out_of_range(spec) if kind_of(spec) in ("INT", "FLOAT") else []:
                bad = json.loads(json.dumps(plan.wf))
                bad[node]["inputs"][name] = value
                status, body = http(port, "/prompt", {"prompt": bad})
                checked += 1
                if status == 200:  # outputs this node does not feed were queued: stop them
                    http(port, "/interrupt", {})
                    http(port, "/queue", {"clear": True})
                refused = status == 400 or body.get("node_errors")
                why = one_message_on(body, Target(node, name, class_type)) if refused \
                    else f"HTTP {status}, not refused"
                said = json.dumps(body.get("node_errors", {}).get(node, {}))
                if why is None and bound.split()[1] not in said:
                    why = f"the message does not say the {bound}: {said[:300]}"
                if why:
                    failures.append(f"{class_type}.{name} = {value!r} ({bound}): {why}")
    print(f"numeric widgets out of range: {checked} values, {len(failures)} failures")
    assert checked > 0
    assert not failures, "\n".join(failures)
