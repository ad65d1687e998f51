"""The node chain on real checkpoints through the real runtime (load_dimoo, denoiser, VQ):
the tiny random fixture checkpoint (tests/fixtures_dimoo.py) always, and the shipped DiMOO-nano
(`ladr_core.nano_model_path()`) via the loader's built-in choice."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.nodes import policy_fields

import ladr_core
from nodes import events, host, loader
from nodes.cache import MLCacheOptions
from nodes.decode import DiMOOVQDecode
from nodes.loader import LoadDiMOOModel
from nodes.policy import LADRPolicyNode
from nodes.sampler_legacy import LegacyDiMOOSampler

NANO_READY = (Path(ladr_core.nano_model_path()) / "config.json").is_file()


@pytest.fixture
def models_dir(dimoo_checkpoint: Path, monkeypatch) -> Path:
    monkeypatch.setenv("LADR_MODELS_DIR", str(dimoo_checkpoint.parent))
    loader._CACHE.clear()
    return dimoo_checkpoint.parent


@pytest.fixture
def sent(monkeypatch) -> list[dict]:
    out: list[dict] = []
    monkeypatch.setattr(host, "send_event", lambda e, p: out.append(p))
    return out


def sample(model, size: int = 32, **kw) -> tuple:
    args = dict(prompt="a red square", negative_prompt="", width=size, height=size, steps=8,
                cfg=2.0, temperature=1.0, seed=5, batch_size=1, strategy="ladr",
                one_prompt_per_line=False)
    return LegacyDiMOOSampler.execute(model=model, **{**args, **kw}).args


def test_full_chain_on_the_fixture_checkpoint(models_dir, sent) -> None:
    assert "Lumina-DiMOO" in loader.model_choices()
    (model,) = LoadDiMOOModel.execute(model_name="Lumina-DiMOO", dtype="fp32").args
    (policy,) = LADRPolicyNode.execute(preset="paper", **policy_fields()).args
    (cache,) = MLCacheOptions.execute(cache_ratio=0.5, warmup_ratio=0.25, refresh_interval=2).args
    tokens, stats = sample(model, policy=policy, cache=cache, batch_size=2)
    (image,) = DiMOOVQDecode.execute(model=model, tokens=tokens).args
    assert image.shape == (2, 32, 32, 3) and image.dtype == torch.float32
    assert 0.0 <= float(image.min()) <= float(image.max()) <= 1.0
    steps = [p for p in sent if not p["done"]]
    assert len(steps) == tokens.stats["steps"] and sent[-1]["done"]
    assert tokens.stats["token_forwards"] < tokens.stats["token_forwards_full"]  # ML-Cache
    assert "% saved" in stats

    direct = model.pipe.generate("a red square", width=32, height=32, steps=8, cfg=2.0,
                                 seed=5, strategy=policy, cache=cache,
                                 batch_size=2)
    assert torch.equal(direct.tokens.cpu(), tokens.tokens)  # the nodes add no drift
    assert torch.allclose(direct.images.float().cpu(), image, atol=1e-6)


def test_over_context_size_is_a_clear_error_and_model_stays_usable(models_dir, sent) -> None:
    (model,) = LoadDiMOOModel.execute(model_name="Lumina-DiMOO", dtype="fp32").args
    with pytest.raises(ValueError, match="(?i)context|sequence|too (large|long)"):
        sample(model, size=128)
    with pytest.raises(ValueError, match="(?i)prompt|context|sequence|too long"):
        sample(model, prompt="word " * 400)
    tokens, _ = sample(model)
    assert tokens.tokens.shape == (1, 64)


def test_cancel_mid_run_then_next_run_equals_a_fresh_one(models_dir, monkeypatch) -> None:
    (model,) = LoadDiMOOModel.execute(model_name="Lumina-DiMOO", dtype="fp32").args
    cache = ladr_core.MLCacheConfig(cache_ratio=0.5, warmup_ratio=0.25, refresh_interval=2)
    fresh, _ = sample(model, cache=cache)

    pressed: list[int] = []

    def cancel_at_step_3(event: str, payload: dict) -> None:
        if payload["step"] == 3 and not payload["done"] and not pressed:
            pressed.append(3)
            host.request_interrupt()  # the user pressed Cancel; the next check raises

    monkeypatch.setattr(host, "send_event", cancel_at_step_3)
    with pytest.raises(host.FallbackInterrupt):
        sample(model, cache=cache)
    assert pressed == [3]
    again, _ = sample(model, cache=cache)
    assert torch.equal(fresh.tokens, again.tokens)


@pytest.mark.skipif(not NANO_READY, reason="DiMOO-nano checkpoint not shipped in this checkout")
def test_builtin_nano_choice_runs_end_to_end(sent) -> None:
    loader._CACHE.clear()
    assert loader.model_choices()[0] == loader.NANO
    (model,) = LoadDiMOOModel.execute(model_name=loader.NANO, dtype="auto").args
    (policy,) = LADRPolicyNode.execute(preset="paper", **policy_fields()).args
    (cache,) = MLCacheOptions.execute(cache_ratio=0.9, warmup_ratio=0.3, refresh_interval=5).args
    size = model.pipe.default_size
    tokens, stats = sample(model, size=size, steps=16, prompt="a red circle", cfg=4.0,
                           policy=policy, cache=cache)
    (image,) = DiMOOVQDecode.execute(model=model, tokens=tokens).args
    assert image.shape == (1, size, size, 3)
    assert tokens.stats["steps"] <= 16 and sent[-1]["done"]
    assert tokens.stats["token_forwards"] < tokens.stats["token_forwards_full"]
    assert float(image.std()) > 0.01  # a picture, not a flat fill


def test_step_payload_preview_comes_from_the_table_not_the_decoder(models_dir, sent,
                                                                   monkeypatch) -> None:
    (model,) = LoadDiMOOModel.execute(model_name="Lumina-DiMOO", dtype="fp32").args
    calls: list[tuple[int, int]] = []  # (images decoded, step events sent before the call)
    real = model.pipe.decode

    def counted(tokens, grid):
        calls.append((tokens.shape[0], sum(1 for p in sent if not p["done"])))
        return real(tokens, grid)

    monkeypatch.setattr(model.pipe, "decode", counted)
    tokens, _ = sample(model)
    steps = tokens.stats["steps"]
    # steps use the table; the VQ decoder runs once, for one image, after the last step: the
    # final preview is the real decode
    assert steps > 1 and calls == [(1, steps)]
    assert not any("preview" in p for p in sent)  # one preview channel: the progress bar
    assert events.EVENT == "ladr.step"


def _shipped(choice: str) -> bool:
    return (Path(getattr(ladr_core, loader.BUILT_IN[choice])()) / "config.json").is_file()


def test_every_built_in_model_is_a_choice_of_its_own_public_folder() -> None:
    """loader.BUILT_IN is the one list: each entry names a public ladr_core folder function,
    and the loader offers every one first, in that order, dimoo-emoji among them."""
    assert loader.EMOJI in loader.BUILT_IN
    assert loader.model_choices()[:len(loader.BUILT_IN)] == list(loader.BUILT_IN)
    for choice, function in loader.BUILT_IN.items():
        assert function in ladr_core.__all__ and choice.endswith(" (built-in)")


@pytest.mark.parametrize("choice", [c for c in loader.BUILT_IN if c != loader.NANO])
def test_a_built_in_choice_loads_and_draws_through_the_nodes(choice, sent) -> None:
    """The other built-ins as the nano's own end-to-end test above: the loader's choice, the
    sampler node and VQ Decode, on the CPU at the checkpoint's own size."""
    if not _shipped(choice):
        pytest.skip(f"{choice} is not shipped in this checkout")
    loader._CACHE.clear()
    (model,) = LoadDiMOOModel.execute(model_name=choice, dtype="auto").args
    folder = Path(getattr(ladr_core, loader.BUILT_IN[choice])())
    assert Path(model.pipe.source_folder).resolve() == folder.resolve()
    size = model.pipe.default_size
    tokens, _ = sample(model, size=size, steps=8, prompt="a red circle", cfg=-1.0,
                       strategy="baseline")
    (image,) = DiMOOVQDecode.execute(model=model, tokens=tokens).args
    assert size == 48 and image.shape == (1, size, size, 3) and sent[-1]["done"]
    assert float(image.std()) > 0.01  # a picture, not a flat fill
    loader._CACHE.clear()
