"""Native LLaDA transformer: official names, shapes, padding invariance, config validation."""

from __future__ import annotations

import pytest
import torch

from ladr_core.dimoo.model.config import ConfigError as DimooConfigError
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel, rope_tables

TINY = dict(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, mlp_hidden_size=48, vocab_size=96,
            max_sequence_length=64, rope_theta=500000.0, rms_norm_eps=1e-5)


def _model(seed: int = 0, **over: object) -> LLaDAModel:
    torch.manual_seed(seed)
    return LLaDAModel(LLaDAConfig(**{**TINY, **over})).eval()


def test_forward_shape_and_official_names() -> None:
    model = _model()
    ids = torch.randint(0, 96, (3, 11))
    assert model(ids).shape == (3, 11, 96)
    keys = set(model.state_dict())
    block0 = {f"model.transformer.blocks.0.{n}.weight" for n in
              ("attn_norm", "ff_norm", "q_proj", "k_proj", "v_proj", "attn_out", "ff_proj",
               "up_proj", "ff_out")}
    assert block0 <= keys
    assert {"model.transformer.wte.weight", "model.transformer.ln_f.weight",
            "model.transformer.ff_out.weight"} <= keys
    assert len(keys) == 3 + 9 * 2
    assert model.state_dict()["model.transformer.blocks.0.k_proj.weight"].shape == (16, 32)


def test_weight_tying_drops_output_layer_and_uses_wte() -> None:
    model = _model(weight_tying=True)
    assert "model.transformer.ff_out.weight" not in model.state_dict()
    ids = torch.randint(0, 96, (1, 5))
    hidden, _ = model.hidden_states(ids)
    ref = torch.nn.functional.linear(model.model.transformer.ln_f(hidden),
                                     model.model.transformer.wte.weight)
    torch.testing.assert_close(model(ids), ref)


def test_padding_with_key_mask_equals_unpadded() -> None:
    model = _model()
    a = torch.randint(0, 96, (1, 9))
    pad = torch.zeros(1, 4, dtype=torch.long)
    mask = torch.cat([torch.zeros(1, 4), torch.ones(1, 9)], dim=1).long()
    left = model(torch.cat([pad, a], 1), attention_mask=mask)[:, 4:]
    right = model(torch.cat([a, pad], 1), attention_mask=mask.flip(1))[:, :9]
    ref = model(a)
    torch.testing.assert_close(left, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(right, ref, atol=1e-5, rtol=1e-5)
    # without the mask the padding is attended (official behaviour) and the result changes
    assert (model(torch.cat([a, pad], 1))[:, :9] - ref).abs().max() > 1e-4


def test_bidirectional_attention() -> None:
    model = _model()
    ids = torch.randint(0, 96, (1, 8))
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 96
    assert (model(ids)[0, 0] - model(changed)[0, 0]).abs().max() > 1e-6


def test_trainable_gradients_reach_every_parameter() -> None:
    model = _model().train()
    ids = torch.randint(0, 96, (2, 6))
    loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_meta_construction_then_assign() -> None:
    ref = _model()
    with torch.device("meta"):
        empty = LLaDAModel(ref.config)
    assert all(p.is_meta for p in empty.parameters())
    state = {k: v.to(torch.bfloat16) for k, v in ref.state_dict().items()}
    empty.load_state_dict(state, assign=True)
    assert next(empty.parameters()).dtype == torch.bfloat16
    ids = torch.randint(0, 96, (1, 7))
    out = empty(ids)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert (out.float() - ref(ids)).abs().max() < 0.1


def test_partial_pass_equals_full_pass_when_kv_is_current() -> None:
    model = _model()
    ids = torch.randint(0, 96, (2, 10))
    with torch.no_grad():
        full, kv = model.hidden_states(ids, return_kv=True)
        index = torch.tensor([[1, 4, 7], [0, 2, 9]])
        part = model.hidden_states_partial(ids, index, kv)
    torch.testing.assert_close(part, full.gather(1, index[..., None].expand(-1, -1, 32)),
                               atol=1e-5, rtol=1e-5)


def test_config_rejects_unsupported_and_non_llada() -> None:
    with pytest.raises(DimooConfigError, match="block_type"):
        LLaDAConfig(**{**TINY, "block_type": "sequential"})
    with pytest.raises(DimooConfigError, match="not a LLaDA"):
        LLaDAConfig.from_dict({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    # official defaults for missing keys are a GPT-2-like sequential block -> rejected clearly
    with pytest.raises(DimooConfigError, match="block_type"):
        LLaDAConfig.from_dict({"model_type": "llada", "d_model": 32, "n_heads": 4})
    cfg = LLaDAConfig.from_dict({**LLaDAConfig(**TINY).to_dict(), "some_future_key": 1})
    assert cfg == LLaDAConfig(**TINY) and cfg.extra["some_future_key"] == 1


def test_ids_rule_defaults_and_overrides() -> None:
    ids = DiMOOIds.from_config_dict({})
    assert (ids.mask, ids.newline, ids.image_offset, ids.codebook_size) == (126336, 126084, 126356, 8192)
    assert (ids.boa, ids.eoa, ids.boi, ids.eoi, ids.uncondition) == (126354, 126355, 126349, 126350, 126351)
    small = DiMOOIds.from_config_dict({"mask_token_id": 5, "image_token_offset": 64, "codebook_size": 32})
    assert (small.mask, small.image_offset, small.codebook_size, small.newline) == (5, 64, 32, 126084)
    with pytest.raises(DimooConfigError, match="exceeds the logits width 90"):
        small.validate_against(90)
    with pytest.raises(DimooConfigError, match="mask_token_id"):
        DiMOOIds.from_config_dict({"mask_token_id": "x"})


def test_inference_mlp_keeps_two_hidden_buffers_alive_and_the_same_numbers() -> None:
    """Under no_grad the gate product runs in place: at the MLP's peak two [M, hidden] buffers
    are alive (gate and up), not three (+ their product); the output is bit-identical to the
    autograd path's."""
    from tests.kit.live_bytes import LiveBytes

    hidden, m = 1024, 64
    model = _model(mlp_hidden_size=hidden)
    block = model.model.transformer.blocks[0]
    x = torch.randn(1, m, 32)
    cos, sin = rope_tables(torch.arange(m)[None], model.config.head_dim, model.config.rope_theta)
    q, k, v = block.qkv(x, cos, sin)
    with torch.no_grad(), LiveBytes() as mem:
        out = block.finish(x, q, k, v, None)
    one = m * hidden * 4
    assert 2 * one <= mem.peak < 3 * one, (mem.peak, one)
    with torch.enable_grad():
        assert torch.equal(out, block.finish(x, q, k, v, None).detach())
