"""The node path on the emulated CUDA device with a host that moves the models the way ComfyUI
does (tests/kit/cuda_emu/comfy_host.py): Load DiMOO Model builds the pipeline on the offload device
(CPU), the sampler and decode nodes ask the host to load it, the host loads it whole or partly
(blocks past a VRAM budget stay on the CPU and are copied over at use) and offloads it between
runs. Every run gives the CPU's tokens, with the step previews and masks of every step sent, and
no violation (tests/kit/cuda_emu)."""

from __future__ import annotations

import pytest
import torch
from support.nodes import SAMPLER_DEFAULTS

from nodes import events, host
from nodes.decode import DiMOOVQDecode
from nodes.loader import NANO, LoadDiMOOModel
from nodes.sampler_legacy import LegacyDiMOOSampler
from tests.kit.cuda_emu.comfy_host import ModelManagement

RUN = {**SAMPLER_DEFAULTS, "batch_size": 2, "steps": 8}


def run_nodes(sent: list) -> tuple:
    (model,) = LoadDiMOOModel.execute(model_name=NANO, dtype="fp32").args
    tokens, _ = LegacyDiMOOSampler.execute(model=model, **RUN).args
    (images,) = DiMOOVQDecode.execute(model=model, tokens=tokens).args
    steps = [p for e, p in sent if e == events.EVENT and not p["done"]]
    return model, tokens, images, steps


@pytest.fixture(scope="module")
def on_cpu() -> tuple:
    """The same node run without a host: everything on the CPU."""
    _, tokens, images, _ = run_nodes([])
    return tokens.tokens, images


@pytest.mark.parametrize("budget", [None, 0], ids=["full load", "partial load"])
def test_the_nodes_run_on_the_device_with_the_cpu_tokens(budget, on_cpu, emu, sent,
                                                        monkeypatch) -> None:
    mm = ModelManagement(vram_budget=budget)
    fakes = mm.modules()
    monkeypatch.setattr(host, "_comfy_module", lambda name: fakes.get(name))
    for _ in range(2 if budget is None else 1):  # offloaded between runs, loaded again
        sent.clear()
        model, tokens, images, steps = run_nodes(sent)
        assert model.pipe.transformer.compute_device().type == "cuda"
        assert torch.equal(tokens.tokens.cpu(), on_cpu[0])
        assert torch.equal(images.cpu(), on_cpu[1])
        assert len(steps) == tokens.stats["steps"] and not emu.violations
        # the sampler's read and the preview's transfer (nodes/events.step_update) per step
        assert sum(emu.loop_reads.values()) <= 2 * tokens.stats["steps"]
        emu.loop_reads.clear()
        mm.unload_all_models()
    assert mm.calls and (budget is None) == (not emu.host_copies)
