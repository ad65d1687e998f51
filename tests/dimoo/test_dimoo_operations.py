"""Injectable layer operations: the model builds its Linear/Embedding layers from the namespace it
is given (as ComfyUI models take `comfy.ops`), with the official names and identical numbers.

The fake namespace is made of real torch modules (subclasses that record what was built and how
their weights were cast at use); torch itself is never mocked.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from ladr_core import load_dimoo
from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.transformer import LLaDAModel

TINY = dict(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, mlp_hidden_size=48, vocab_size=96,
            max_sequence_length=64, rope_theta=500000.0)


def recording_ops() -> SimpleNamespace:
    """Linear / Embedding subclasses that record construction and cast their weight at use
    to the input's device (what a host's offloading classes do)."""
    built: list[tuple[str, tuple]] = []
    casts: list[str] = []

    class Linear(nn.Linear):
        def __init__(self, in_features: int, out_features: int, bias: bool = True, **kw) -> None:
            built.append(("Linear", (in_features, out_features, bias)))
            super().__init__(in_features, out_features, bias=bias, **kw)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            casts.append(str(self.weight.device))
            bias = self.bias.to(x.device) if self.bias is not None else None
            return nn.functional.linear(x, self.weight.to(x.device, x.dtype), bias)

    class Embedding(nn.Embedding):
        def __init__(self, num: int, dim: int, **kw) -> None:
            built.append(("Embedding", (num, dim)))
            super().__init__(num, dim, **kw)

    return SimpleNamespace(Linear=Linear, Embedding=Embedding, built=built, casts=casts)


def test_layers_come_from_the_namespace_with_official_names_and_same_logits() -> None:
    cfg = LLaDAConfig(**TINY)
    ops = recording_ops()
    torch.manual_seed(0)
    ref = LLaDAModel(cfg).eval()
    model = LLaDAModel(cfg, init_std=None, operations=ops).eval()
    assert list(model.state_dict()) == list(ref.state_dict())
    model.load_state_dict(ref.state_dict())
    linears = [b for b in ops.built if b[0] == "Linear"]
    assert len(linears) == 7 * cfg.n_layers + 1 and ("Embedding", (96, 32)) in ops.built
    assert isinstance(model.blocks[0].q_proj, ops.Linear)
    assert isinstance(model.model.transformer.ff_out, ops.Linear)
    ids = torch.randint(0, 96, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), ref(ids), rtol=0, atol=0)
    assert len(ops.casts) == 7 * cfg.n_layers  # the head is projected by rows (model.project)


def test_default_namespace_is_torch_nn() -> None:
    model = LLaDAModel(LLaDAConfig(**TINY))
    assert type(model.blocks[0].q_proj) is nn.Linear
    assert type(model.model.transformer.wte) is nn.Embedding
    assert model.device is None and model.compute_device() == torch.device("cpu")
    model.device = torch.device("meta")  # a host (ModelPatcher, stream_blocks) says where inputs go
    assert model.compute_device() == torch.device("meta")


def test_load_dimoo_passes_operations_to_the_model(dimoo_checkpoint: Path) -> None:
    ops = recording_ops()
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32, operations=ops)
    ref = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    assert isinstance(pipe.transformer.blocks[1].ff_out, ops.Linear)
    ids = torch.randint(0, 40, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(pipe.transformer(ids), ref.transformer(ids), rtol=0, atol=0)
