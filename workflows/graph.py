"""The shipped nano templates' pictures, made by the pack's nodes and judged by the nano evaluator.

`run_nodes` runs an API workflow's wanted nodes without ComfyUI: each and what it links to, in
dependency order; our nodes by their own ``execute`` (inside ComfyUI's V3 API, or the tests'
stand-in of it), Load Image and Pad Image for Outpainting as workflows/thumbnails.py models them,
Distributed Seed as it seeds the master (its own seed). Nodes that only show or save a result
are not run. `pictures` pairs each decoded image with the prompt its sampler drew it for, and
`verdicts` holds each to the evaluator (testbed.evaluator, the prompt read back into its spec by
testbed.scenes.spec_of_caption). tests/nodes/test_templates_pass.py runs every nano template
this way; benchmarks/template_settings.py measures the candidate settings on their tasks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nodes import node_classes
from nodes.loader import NANO
from nodes.sampler import split_prompts
from workflows.thumbnails import API_DIR, load_image, pad_for_outpainting

CORE = {
    "LoadImage": lambda image: load_image(image),
    "ImagePadForOutpaint": lambda image, **kw: pad_for_outpainting(image, **kw),
    "DistributedSeed": lambda seed: (seed,),  # the master's; worker k draws with seed + k
}
"""The core and ComfyUI-Distributed nodes a picture depends on in the templates: kwargs ->
outputs."""


def nano_templates() -> list[Path]:
    """The API workflows whose loader loads the built-in nano model."""
    return [p for p in sorted(API_DIR.glob("*.json"))
            if any(n["class_type"] == "LADR_LoadDiMOOModel"
                   and n["inputs"]["model_name"] == NANO
                   for n in json.loads(p.read_text()).values())]


def run_nodes(wf: dict, wanted: str) -> dict[str, tuple]:
    """Every node of class ``wanted`` in API workflow ``wf`` executed with what it links to:
    node id -> its outputs (a tuple, in output order)."""
    ours = {c.define_schema().node_id: c for c in node_classes()}
    done: dict[str, tuple] = {}

    def outputs(key: str) -> tuple:
        if key not in done:
            node = wf[key]
            kw = {k: outputs(v[0])[v[1]] if isinstance(v, list) else v
                  for k, v in node["inputs"].items()}
            kind = node["class_type"]
            if kind in CORE:
                done[key] = tuple(CORE[kind](**kw))
            elif kind in ours:
                done[key] = tuple(ours[kind].execute(**kw).args)
            else:
                raise ValueError(f"node {key}: {kind} is not run here (workflows/graph.py)")
        return done[key]

    return {k: outputs(k) for k, n in wf.items() if n["class_type"] == wanted}


def pictures(wf: dict) -> list[tuple[str, str, np.ndarray]]:
    """(sampler node id, prompt, uint8 [H, W, 3]) for every image each VQ Decode of ``wf``
    gives, in the order the sampler made them (each prompt line batch_size times)."""
    out = []
    for key, (images,) in run_nodes(wf, "LADR_DiMOOVQDecode").items():
        src = wf[key]["inputs"]["tokens"][0]
        kw = wf[src]["inputs"]
        prompts = split_prompts(kw["prompt"], kw["one_prompt_per_line"])[0]
        each = [p for p in prompts for _ in range(kw["batch_size"])]
        arr = (images.clamp(0, 1).numpy() * 255).round().astype(np.uint8)
        if len(each) != len(arr):
            raise ValueError(f"sampler {src}: {len(arr)} images for {len(each)} prompts")
        out += [(src, p, im) for p, im in zip(each, arr, strict=True)]
    return out


def verdict(prompt: str, image: np.ndarray) -> dict:
    """The evaluator on one picture: passed, and what it saw ((shape, colour) per object)."""
    from testbed import evaluator, scenes

    found = evaluator.detect(image)
    return {"passed": evaluator.check(scenes.spec_of_caption(prompt), found),
            "seen": [f"{d.color} {d.shape}" for d in found]}


def verdicts(wf: dict) -> list[dict]:
    """`verdict` of every picture of ``wf``, with its sampler and prompt."""
    return [{"sampler": src, "prompt": p, **verdict(p, im)} for src, p, im in pictures(wf)]
