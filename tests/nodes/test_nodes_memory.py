"""What the nodes ask ComfyUI to keep free beside the weights (before, the sampler
asked for 0 bytes, so all the weights loaded and left no room for the run): the pipeline's
estimate for the job (ladr_core/dimoo/model/memory.py), and one image's decode for VQ Decode."""

from __future__ import annotations

import pytest
from support.nodes import SAMPLER_DEFAULTS

import ladr_core
from nodes import host
from nodes.decode import DiMOOVQDecode
from nodes.sampler_legacy import LegacyDiMOOSampler


@pytest.fixture
def loads(monkeypatch) -> list[tuple[int, bool]]:
    out: list[tuple[int, bool]] = []

    def load(patchers: object, memory_required: int = 0, vq_only: bool = False) -> None:
        out.append((memory_required, vq_only))

    monkeypatch.setattr(host, "load_to_device", load)
    return out


@pytest.mark.parametrize(("max_batch", "flying"), [(0, 1), (2, 2), (9, 3)])
def test_the_sampler_asks_for_the_runs_memory(fake_model, sent, loads, max_batch: int,
                                              flying: int) -> None:
    """Images in flight as asked (at most the batch); the automatic choice (0) asks for one
    and fills what is free after loading."""
    cache = ladr_core.MLCacheConfig()
    args = {**SAMPLER_DEFAULTS, "batch_size": 3, "max_batch": max_batch, "cache": cache}
    LegacyDiMOOSampler.execute(model=fake_model, **args)
    pipe = fake_model.pipe
    job = pipe.prepare_text([SAMPLER_DEFAULTS["prompt"]], width=48, height=48,
                            cfg=SAMPLER_DEFAULTS["cfg"], batch_size=3)
    assert loads[0] == (pipe.run_memory(job, flying, cache), False)
    assert loads[0][0] > pipe.run_memory(job, flying) > 0  # the cache's buffers counted


def test_vq_decode_asks_for_one_images_decode_and_the_batchs_output(fake_model, sent,
                                                                      loads) -> None:
    tokens, _ = LegacyDiMOOSampler.execute(model=fake_model,
                                     **{**SAMPLER_DEFAULTS, "batch_size": 2}).args
    loads.clear()
    DiMOOVQDecode.execute(model=fake_model, tokens=tokens)
    assert loads == [(fake_model.pipe.decode_bytes(48, 48, 2), True)]
    assert loads[0][0] > fake_model.pipe.decode_bytes(48, 48) > 0


def test_dimoo_edit_asks_for_its_runs_memory(dimoo_checkpoint, sent, loads) -> None:
    """Every image of an edit is in flight at once (three rows each: cond, text-uncond,
    image-uncond)."""
    import torch

    from nodes.edit import DiMOOEdit
    from nodes.handles import DiMOOModel

    pipe = ladr_core.load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    image = torch.rand(2, 32, 32, 3, generator=torch.Generator().manual_seed(0))
    DiMOOEdit.execute(model=DiMOOModel(pipe=pipe, key=("tiny",), name="tiny"), image=image,
                      instruction="make it green", edit_type="edit", cfg=2.5, image_cfg=4.0,
                      steps=4, temperature=1.0, seed=0, strategy="ladr", size="as is")
    job = pipe.prepare_edit("make it green", image=image, size="as is", cfg=2.5, image_cfg=4.0,
                            batch_size=2)
    assert job.rows(pipe.encode)[0] == 3
    assert loads == [(pipe.run_memory(job, 2), False)]


def test_vq_encode_asks_for_one_images_worth(fake_model, sent, loads) -> None:
    """Images are encoded one at a time; one image's decode memory bounds the encoder's."""
    import torch

    from nodes.encode import DiMOOVQEncode

    image = torch.rand(3, 48, 32, 3, generator=torch.Generator().manual_seed(0))
    DiMOOVQEncode.execute(model=fake_model, image=image)
    assert loads == [(fake_model.pipe.decode_bytes(32, 48), True)]
    assert loads[0][0] > 0


def test_calibrate_asks_for_its_runs_memory(model, three_candidates, loads) -> None:
    """The calibration samples `batch` images of its prompts at its size at once. Its runs have
    a callback (progress), so the first builds the preview table before its first step: the
    request counts that build while no table exists (``run_memory``), not after."""
    from nodes.calibrate import LADRCalibrate

    args = {"prompts": "a red circle\na blue square", "seeds": 1, "size": 32, "steps": 4,
            "budget_minutes": 0.0, "batch": 2}
    pipe = model.pipe
    job = pipe.prepare_text(args["prompts"].splitlines(), width=32, height=32)
    before = pipe.run_memory(job, 2)  # no preview table yet
    assert pipe.preview_bytes() > 0
    LADRCalibrate.execute(model=model, mode="run", **args)
    assert loads == [(before, False)]
    assert pipe.preview_bytes() == 0  # the table was built by the first run, and is kept
    assert loads[0][0] >= pipe.run_memory(job, 2) > 0


@pytest.mark.parametrize("node", ["caption", "ask"])
def test_caption_and_ask_ask_for_the_answers_memory(dimoo_checkpoint, sent, loads,
                                                    node: str) -> None:
    """The answers of a batch roll through packed passes, as many as the memory left after
    loading holds: the request is the pipeline's estimate for one answer in flight (it asked
    for 0 bytes before), below the whole batch's in one pass."""
    import torch

    from nodes.handles import DiMOOModel
    from nodes.understand import CAPTION_QUESTION, DiMOOAsk, DiMOOCaption

    pipe = ladr_core.load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    model = DiMOOModel(pipe=pipe, key=("tiny",), name="tiny")
    image = torch.rand(2, 32, 32, 3, generator=torch.Generator().manual_seed(0))
    args = dict(rule="entropy", max_answer=32, temperature=1.0, seed=0, size="as is")
    if node == "caption":
        DiMOOCaption.execute(model=model, image=image, **args)
        question = CAPTION_QUESTION
    else:
        question = "what is it?"
        DiMOOAsk.execute(model=model, image=image, question=question, **args)
    job = pipe.prepare_understand(image, question, **{k: v for k, v in args.items()
                                                      if k != "seed"})
    assert loads == [(pipe.understand_memory(job, 1), False)]
    one = pipe.prepare_understand(image[:1], question, **{k: v for k, v in args.items()
                                                          if k != "seed"})
    assert loads[0][0] == pipe.understand_memory(one) < pipe.understand_memory(job)
