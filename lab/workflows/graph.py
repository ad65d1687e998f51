"""The shipped nano templates' pictures, made by the pack's nodes and judged by the nano evaluator.

`run_nodes` runs an API workflow's wanted nodes without ComfyUI (tests/kit/run_graph.py: each
and what it links to, our nodes by their own ``execute``, the core nodes modelled), the model
loaded by the workflow's own Load DiMOO Model node. Nodes that only show or save a result are
not run. `pictures` pairs each decoded image with the prompt its sampler drew it for, and
`verdicts` holds each to the evaluator (lab.nano.evaluator, the prompt read back into its spec by
lab.nano.scenes.spec_of_caption). lab/tests/workflows/test_templates_pass.py runs every nano template
this way; lab/studies/template_settings.py measures the candidate settings on their tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nodes import NANO, node_classes, split_prompts
from tests.kit.run_graph import ROOT, run_node

API_DIR = ROOT / "example_workflows" / "api"


def nano_templates(models: tuple[str, ...] = (NANO,)) -> list[Path]:
    """The API workflows whose loader loads one of ``models`` (default: the built-in nano that
    draws; nodes.loader.BUILT_IN adds the one that also answers)."""
    return [p for p in sorted(API_DIR.glob("*.json"))
            if any(n["class_type"] == "LADR_LoadDiMOOModel"
                   and n["inputs"]["model_name"] in models
                   for n in json.loads(p.read_text()).values())]


def run_nodes(wf: dict, wanted: str, done: dict[str, tuple] | None = None
              ) -> dict[str, tuple]:
    """Every node of class ``wanted`` in API workflow ``wf`` executed with what it links to:
    node id -> its outputs (a tuple, in output order). ``done``: every node run, by id."""
    loader = next(k for k, n in wf.items() if n["class_type"] == "LADR_LoadDiMOOModel")
    cls = next(c for c in node_classes() if c.define_schema().node_id == "LADR_LoadDiMOOModel")
    model = cls.execute(**wf[loader]["inputs"]).args[0]
    done = {} if done is None else done
    return {k: run_node(wf, k, model, done) for k, n in wf.items() if n["class_type"] == wanted}


def batch_size(wf: dict, sampler: str) -> int:
    """Images per prompt of a sampler: its canvas's batch_size (the legacy sampler's own
    widget; 1 without a canvas)."""
    kw = wf[sampler]["inputs"]
    if "batch_size" in kw:
        return int(kw["batch_size"])
    link = kw.get("canvas")
    return int(wf[str(link[0])]["inputs"].get("batch_size", 1)) if link else 1


def pictures(wf: dict) -> list[tuple[str, str, np.ndarray]]:
    """(sampler node id, prompt, uint8 [H, W, 3]) for every image each VQ Decode of ``wf``
    gives, in the order the sampler made them (each prompt line batch_size times; a prompt
    fed by a link: the text that node gave)."""
    out, done = [], {}
    for key, (images,) in run_nodes(wf, "LADR_DiMOOVQDecode", done).items():
        src = wf[key]["inputs"]["tokens"][0]
        kw = wf[src]["inputs"]
        link = kw["prompt"]  # a link: the text the linked node gave (DiMOO Caption's)
        text = done[str(link[0])][link[1]] if isinstance(link, list) else link
        prompts = split_prompts(text, kw["one_prompt_per_line"])[0]
        each = [p for p in prompts for _ in range(batch_size(wf, src))]
        arr = (images.clamp(0, 1).numpy() * 255).round().astype(np.uint8)
        if len(each) != len(arr):
            raise ValueError(f"sampler {src}: {len(arr)} images for {len(each)} prompts")
        out += [(src, p, im) for p, im in zip(each, arr, strict=True)]
    return out


def verdict(prompt: str, image: np.ndarray) -> dict:
    """The evaluator on one picture: passed, and what it saw ((shape, colour) per object)."""
    from lab.nano import evaluator, scenes

    found = evaluator.detect(image)
    return {"passed": evaluator.check(scenes.spec_of_caption(prompt), found),
            "seen": [f"{d.color} {d.shape}" for d in found]}


def verdicts(wf: dict) -> list[dict]:
    """`verdict` of every picture of ``wf``, with its sampler and prompt."""
    return [{"sampler": src, "prompt": p, **verdict(p, im)} for src, p, im in pictures(wf)]
