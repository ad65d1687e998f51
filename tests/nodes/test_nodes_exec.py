"""Every node executed on CPU without ComfyUI (host fallbacks), on the real pipeline with the
shipped DiMOO-nano model (`load_dimoo(nano_model_path())`, 48 px, 12 x 12 tokens)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from support.nodes import SAMPLER_DEFAULTS, bits, nano_pipe, policy_fields

import ladr_core
from nodes import events, host, loader
from nodes.decode import DiMOOVQDecode
from nodes.handles import DiMOOModel
from nodes.loader import LoadDiMOOModel
from nodes.policy import LADRPolicyNode
from nodes.sampler_legacy import LegacyDiMOOSampler


def run(model: DiMOOModel, **kw) -> tuple:
    args = {**SAMPLER_DEFAULTS, **kw}
    return LegacyDiMOOSampler.execute(model=model, **args).args


def test_sampler_outputs_tokens_stats_and_one_event_per_step(fake_model, sent) -> None:
    tokens, stats = run(fake_model)
    assert tokens.tokens.shape == (1, 12 * 12) and tokens.grid == (12, 12)
    assert tokens.tokens.dtype == torch.long and tokens.tokens.device.type == "cpu"
    steps = tokens.stats["steps"]
    nfe = tokens.stats["nfe"]
    planned = SAMPLER_DEFAULTS["steps"]  # the official sampler at the same steps: the price
    assert stats.startswith(f"ladr: done after {steps} of {planned} planned steps · {nfe} forward "
                            f"passes vs {planned} for the official sampler ({planned} steps, 144 "
                            "tokens): ")
    step_events = [p for e, p in sent if e == events.EVENT and not p["done"]]
    assert [p["step"] for p in step_events] == list(range(1, steps + 1))
    assert sent[-1][1]["done"] and sent[-1][1]["stats"] == tokens.stats
    last = step_events[-1]
    assert last["masked_pct"] == 0.0 and not bits(last["masked_bits"], 144).any()
    for p in step_events:
        assert bits(p["rescued_bits"], 144).sum() == p["rescued"] <= p["unmasked"]
        assert p["phase"] in ("exploration", "structure", "refinement")
        assert "preview" not in p  # the picture goes through the progress bar only
    progress = [p["progress"] for p in step_events]
    assert progress == sorted(progress) and progress[-1] == 1.0 and progress[0] < 1.0


def test_ladr_runs_fewer_steps_than_baseline_and_rescues(fake_model, sent) -> None:
    (nano,) = LADRPolicyNode.execute(preset="nano", **policy_fields()).args
    ladr, text = run(fake_model, steps=64, policy=nano)
    base, base_text = run(fake_model, steps=64, strategy="baseline")
    assert base.stats["steps"] == 64
    assert base_text.startswith("baseline: 64 of 64 planned steps · 64 forward passes (the "
                                "official sampler) · ")
    fewer = 64 / ladr.stats["nfe"]
    assert f"of 64 planned steps · {ladr.stats['nfe']} forward passes vs 64 for the official " \
        f"sampler (64 steps, 144 tokens): {fewer:.1f}x fewer · " in text
    assert ladr.stats["steps"] < base.stats["steps"]
    assert sum(p["rescued"] for _, p in sent if not p["done"]) > 0
    assert [p["steps"] for _, p in sent if p.get("strategy") == "ladr"][0] == 64
    assert text.endswith("; preset nano no longer brings its own T=128: it runs steps=64, never "
                         "more forward passes than the official sampler")


def test_policy_preset_reaches_the_core(fake_model, sent, seen) -> None:
    (policy,) = LADRPolicyNode.execute(preset="delayed", **policy_fields()).args
    _, text = run(fake_model, policy=policy)
    assert seen[-1]["strategy"] == ladr_core.LADR(ladr_core.PRESETS["delayed"].policy)
    assert "not used" not in text
    _, text = run(fake_model, strategy="baseline", policy=policy)
    assert seen[-1]["strategy"] == ladr_core.Baseline()
    assert text.endswith("the connected LADR Policy was not used (strategy is 'baseline')")


def test_prophet_policy_node_reaches_the_core(fake_model, sent, seen) -> None:
    from nodes.policy import ProphetPolicyNode

    fields = dict(threshold_early=9.0, threshold_middle=4.0, threshold_late=1.0,
                  middle_start=0.2, late_start=0.5)
    (prophet,) = ProphetPolicyNode.execute(**fields).args
    _, text = run(fake_model, strategy="prophet", policy=prophet)
    want = ladr_core.ProphetPolicy(thresholds=(9.0, 4.0, 1.0), progress_bounds=(0.2, 0.5))
    assert seen[-1]["strategy"] == ladr_core.Prophet(want) and "not used" not in text
    _, text = run(fake_model, strategy="ladr", policy=prophet)
    assert seen[-1]["strategy"] == ladr_core.LADR()
    assert text.endswith("the connected Prophet Policy was not used (strategy is 'ladr')")
    with pytest.raises(ValueError, match="Prophet Policy: .*progress_bounds"):
        ProphetPolicyNode.execute(**{**fields, "late_start": 0.1})


def test_prompt_lines_and_batch_items_match_single_runs(fake_model, sent) -> None:
    batch, text = run(fake_model, prompt="a cat\n\na dog\n", one_prompt_per_line=True,
                      batch_size=2)
    assert batch.tokens.shape[0] == 4
    assert "1 empty prompt line skipped" in text and batch.stats["images"] == 4
    single, _ = run(fake_model, prompt="a cat", seed=SAMPLER_DEFAULTS["seed"] + 1)
    assert torch.equal(batch.tokens[1], single.tokens[0])


def test_interrupt_propagates_and_next_run_equals_a_fresh_one(fake_model, sent) -> None:
    fresh, _ = run(fake_model)
    host.request_interrupt()
    with pytest.raises(host.FallbackInterrupt):
        run(fake_model)
    assert not isinstance(host.FallbackInterrupt(), Exception)  # not caught by `except Exception`
    again, _ = run(fake_model)
    assert torch.equal(fresh.tokens, again.tokens)


def test_decode_returns_comfy_image_batch(fake_model, sent) -> None:
    tokens, _ = run(fake_model, batch_size=2)
    (image,) = DiMOOVQDecode.execute(model=fake_model, tokens=tokens).args
    assert image.shape == (2, 48, 48, 3) and image.dtype == torch.float32
    assert float(image.min()) >= 0.0 and float(image.max()) <= 1.0
    other = DiMOOModel(pipe=fake_model.pipe, key=("other",), name="other")
    with pytest.raises(ValueError, match="DiMOO VQ Decode: tokens were sampled with another "
                                         "checkpoint .*same Load DiMOO Model"):
        DiMOOVQDecode.execute(model=other, tokens=tokens)


def test_decode_names_the_loader_setting_that_differs(fake_model) -> None:
    """Tokens of the same checkpoint loaded with another dtype: the same codebook, so the
    message names the setting, not another checkpoint (and says the tokens were encoded)."""
    from nodes.encode import encode_image

    path_key = ("/models/nano", 1.0)
    bf16 = DiMOOModel(pipe=fake_model.pipe, key=(*path_key, "torch.bfloat16", "cpu"), name="n")
    fp32 = DiMOOModel(pipe=fake_model.pipe, key=(*path_key, "torch.float32", "cpu"), name="n")
    tokens = encode_image(bf16, torch.rand(1, 48, 48, 3))
    with pytest.raises(ValueError, match=r"^DiMOO VQ Decode: tokens were encoded \(DiMOO VQ "
                                         r"Encode\) by a Load DiMOO Model of the same checkpoint "
                                         r"with other settings \(dtype torch.bfloat16 there, "
                                         r"torch.float32 here\); connect"):
        DiMOOVQDecode.execute(model=fp32, tokens=tokens)


@pytest.mark.parametrize(("kw", "needle"), [
    ({"width": 1000}, r"DiMOO Sampler: width=1000 makes the image too large: 1000 x 48 px need "
                      r"30.. tokens .*model's context .* is 512; set width to at most 160 \(at "
                      r"height 48\)"),
    ({"prompt": "  \n ", "one_prompt_per_line": True}, "prompt is empty"),
    ({"prompt": "", "one_prompt_per_line": False}, "prompt is empty"),
    ({"cfg": -0.5}, "cfg is -0.5"),
])
def test_sampler_refuses_bad_values_naming_the_input(fake_model, kw, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        run(fake_model, **kw)
    if "prompt" in kw:  # also refused at validation, before any model loads
        assert needle in LegacyDiMOOSampler.validate_inputs(prompt=kw["prompt"])
    assert LegacyDiMOOSampler.validate_inputs(prompt=SAMPLER_DEFAULTS["prompt"]) is True


def test_legacy_size_widgets_are_checked_on_the_connected_models_grid(fake_model) -> None:
    """Validation names only `prompt` (ComfyUI would put a size message on prompt, width and
    height); the run checks the size on the model's own grid: nano's VQ factor is 4."""
    assert LegacyDiMOOSampler.validate_inputs(prompt="a fox") is True
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: width=50 is not a multiple of 4 "
                                         r"\(one token per 4 x 4 pixels\); nearest valid width: "
                                         r"48 or 52$"):
        run(fake_model, width=50)
    assert run(fake_model, width=40, steps=4)[0].width == 40  # on nano's grid, off 16 px


def test_sampler_rejects_foreign_policy_and_model_sized_errors(fake_model, sent) -> None:
    stale = SimpleNamespace(alpha=(0.1, 0.3, 1.0))
    with pytest.raises(ValueError, match="re-create the LADR Policy node and reconnect it"):
        run(fake_model, policy=stale)
    # the model's own grid: nano's VQ factor is 4 (the widget's 16 px step is validated first)
    with pytest.raises(ValueError, match="DiMOO Sampler: width=42 is not a multiple of 4.*nearest "
                                         "valid width: 40 or 44"):
        run(fake_model, width=42)


def test_policy_node_custom_fields_and_invalid_combos() -> None:
    (p,) = LADRPolicyNode.execute(preset="custom", **policy_fields(alpha_structure=0.5)).args
    assert p.policy == ladr_core.LADRPolicy(alpha=(0.1, 0.5, 1.0))
    assert LADRPolicyNode.execute(preset="custom", **policy_fields()).args[0] == ladr_core.LADR()
    (off,) = LADRPolicyNode.execute(preset="off", **policy_fields()).args
    assert off.policy.alpha == (0.0, 0.0, 0.0)
    (nano,) = LADRPolicyNode.execute(preset="nano", **policy_fields()).args
    assert nano == ladr_core.LADR(ladr_core.PRESETS["nano"].policy)
    with pytest.raises(ValueError, match="LADR Policy: .*phase_bounds"):
        LADRPolicyNode.execute(preset="custom", **policy_fields(exploration_end=0.9))
    with pytest.raises(ValueError, match="kernel_size"):
        LADRPolicyNode.execute(preset="custom", **policy_fields(kernel_size=4))
    assert LADRPolicyNode.validate_inputs(preset="paper") is True
    assert "not one of" in LADRPolicyNode.validate_inputs(preset="gone")


@pytest.mark.parametrize("tau", [-0.5, -2.0, 1.5])
def test_policy_node_refuses_negative_tau_other_than_minus_one(tau) -> None:
    with pytest.raises(ValueError) as err:
        LADRPolicyNode.execute(preset="custom", **policy_fields(tau_structure=tau))
    msg = str(err.value)
    assert f"tau_structure={tau!r}" in msg and "-1 for no threshold" in msg
    (p,) = LADRPolicyNode.execute(preset="custom", **policy_fields(tau_structure=-1.0)).args
    assert p.policy.tau == (0.05, None, None)


def test_policy_node_optional_fields_reach_the_policy_and_default_when_absent() -> None:
    custom = policy_fields(selection="gumbel", rescue_token="argmax", seen_only=True)
    (p,) = LADRPolicyNode.execute(preset="custom", **custom).args
    assert (p.policy.selection, p.policy.rescue_token, p.policy.seen_only) == ("gumbel", "argmax",
                                                                              True)
    old = {k: v for k, v in policy_fields().items() if k not in ("selection", "rescue_token",
                                                            "seen_only")}
    assert LADRPolicyNode.execute(preset="custom", **old).args[0] == ladr_core.LADR()
    with pytest.raises(ValueError, match="selection must be one of"):
        LADRPolicyNode.execute(preset="custom", **policy_fields(selection="noisy"))


def test_loader_lists_folders_caches_and_reloads(tmp_path, monkeypatch) -> None:
    (tmp_path / "DiMOO-8B").mkdir()
    (tmp_path / "DiMOO-8B" / "config.json").write_text("{}")
    (tmp_path / "not-a-model").mkdir()
    monkeypatch.setenv("LADR_MODELS_DIR", str(tmp_path))
    loads: list[tuple] = []

    def fake_load(path, device, dtype, weight_dtype=None, operations=None):
        loads.append((path, dtype))
        return nano_pipe()

    monkeypatch.setattr(loader, "load_pipeline", fake_load)
    assert loader.model_choices() == [*loader.BUILT_IN, "DiMOO-8B"]
    a = LoadDiMOOModel.execute(model_name="DiMOO-8B", dtype="fp32").args[0]
    b = LoadDiMOOModel.execute(model_name="DiMOO-8B", dtype="fp32").args[0]
    c = LoadDiMOOModel.execute(model_name="DiMOO-8B", dtype="bf16").args[0]
    assert a is b and c is not a and len(loads) == 2 and loads[1][1] == torch.bfloat16
    msg = LoadDiMOOModel.validate_inputs(model_name="gone")
    assert "'gone'" in msg and str(tmp_path) in msg and "models/lumina_dimoo/gone" in msg
    assert LoadDiMOOModel.validate_inputs(model_name="DiMOO-8B") is True


def test_mlcache_node_builds_config_and_rejects_bad_values() -> None:
    from nodes.cache import MLCacheOptions

    (cfg,) = MLCacheOptions.execute(cache_ratio=0.8, warmup_ratio=0.2, refresh_interval=3).args
    assert cfg == ladr_core.MLCacheConfig(cache_ratio=0.8, warmup_ratio=0.2, refresh_interval=3)
    with pytest.raises(ValueError, match="ML-Cache Options: cache_ratio must be in"):
        MLCacheOptions.execute(cache_ratio=float("nan"), warmup_ratio=0.3, refresh_interval=5)
    ranges = {i.id: (i.min, i.max) for i in MLCacheOptions.define_schema().inputs
              if i.io_type in ("INT", "FLOAT")}  # numbers have a range, the preset combo not
    assert ranges["cache_ratio"] == (0.01, 0.99)  # the schema refuses 1.0 itself, on the input


def test_mlcache_node_presets_ignore_the_fields_and_old_workflows_stay_custom() -> None:
    from nodes.cache import MLCacheOptions

    odd = {"cache_ratio": 0.5, "warmup_ratio": 0.0, "refresh_interval": 7}
    (ladr,) = MLCacheOptions.execute(**odd, preset="ladr").args
    assert ladr == ladr_core.MLCacheConfig.ladr() and ladr.recompute_masked
    (official,) = MLCacheOptions.execute(**odd, preset="official").args
    assert official == ladr_core.MLCacheConfig()
    (custom,) = MLCacheOptions.execute(**odd).args  # a workflow saved before `preset` existed
    assert custom == ladr_core.MLCacheConfig(**odd)
    inputs = [i.id for i in MLCacheOptions.define_schema().inputs]
    assert inputs[-1] == "preset"  # last, so saved widget values keep their order
    with pytest.raises(ValueError, match="preset 'fast' is not one of"):
        MLCacheOptions.execute(**odd, preset="fast")


@pytest.mark.parametrize("choice", list(loader.BUILT_IN))
def test_loader_reports_a_missing_builtin_nano(tmp_path, monkeypatch, choice) -> None:
    monkeypatch.setattr(ladr_core, loader.BUILT_IN[choice], lambda: tmp_path / "gone_nano")
    msg = LoadDiMOOModel.validate_inputs(model_name=choice)
    assert f"built-in {choice.split()[0]} checkpoint is missing" in msg and "gone_nano" in msg


def test_sampler_returns_its_run_map_as_ui_output_that_a_cached_run_sends_again(
        fake_model, sent) -> None:
    """The final event is also the node's UI output "ladr_step_map" (ComfyUI keeps it in the
    history and sends it again for a cached run): the run's rescue map is the union of every
    step's rescued tokens and its decode order the step each token was first seen decoded,
    as web/ladr_preview_draw.js trackRun builds them live."""
    import base64
    import time

    import numpy as np

    before = time.time()
    out = LegacyDiMOOSampler.execute(model=fake_model, **SAMPLER_DEFAULTS)
    final = sent[-1][1]
    assert out.ui == {"ladr_step_map": [final]} and final["done"]
    assert before <= final["finished_at"] <= time.time() + 1
    steps = [p for e, p in sent if e == events.EVENT and not p["done"]]
    n = final["grid"][0] * final["grid"][1]
    rescued = np.zeros(n, bool)
    order = np.zeros(n, int)
    for p in steps:
        rescued |= events.unpack_bits(p["rescued_bits"], n)
        first = ~events.unpack_bits(p["masked_bits"], n) & (order == 0)
        order[first] = p["step"]
    assert rescued.any() and (order > 0).all()  # LADR rescued some; every token decoded
    assert (events.unpack_bits(final["rescued_run_bits"], n) == rescued).all()
    got = np.frombuffer(base64.b64decode(final["decode_order_b64"]), "<u2")
    assert got.tolist() == order.tolist()


def test_stats_line_counts_read_right_in_the_singular() -> None:
    """The stats line says "1 pass" and "1 step", never "1 passes"."""
    from nodes.run_stats import stats_text

    one = {"strategy": "ladr", "steps": 1, "nfe": 1, "nfe_per_image": 1.0, "seconds": 0.5,
           "images": 1, "tokens_per_image": 4, "official_nfe_per_image": 4.0,
           "official_steps": 64}
    text = stats_text(one)
    assert text.startswith("ladr: 1 step · 1 forward pass vs 4 for the official sampler"), text
    planned = stats_text({**one, "steps_planned": 256})
    assert planned.startswith("ladr: done after 1 of 256 planned steps · "), planned
    assert stats_text({**one, "steps_planned": 1}).startswith("ladr: 1 of 1 planned step · ")
