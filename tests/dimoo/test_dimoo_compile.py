"""Opt-in torch.compile of the transformer passes: plumbing, equality, one compile per shape."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import DiMOOPipeline, MLCacheConfig, load_dimoo
from ladr_core.dimoo.model.compile import CompiledPasses
from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.packed import PackedRows, full_pass, partial_pass
from ladr_core.dimoo.model.transformer import LLaDAModel


@pytest.fixture(scope="module")
def pipe(dimoo_checkpoint: Path) -> DiMOOPipeline:
    return load_dimoo(dimoo_checkpoint, dtype=torch.float32)


def _gen(pipe: DiMOOPipeline, **kw: object):  # noqa: ANN202
    args = dict(prompt="a red circle", width=16, height=16, steps=6, cfg=2.0, seed=3,
                strategy="ladr", decode=False, cache=MLCacheConfig(warmup_ratio=0.0,
                                                                   refresh_interval=2))
    return pipe.generate(**{**args, **kw})


def test_compile_is_opt_in_equal_and_compiles_each_shape_once(pipe: DiMOOPipeline) -> None:
    torch._dynamo.reset()
    assert pipe.compiled is None  # off by default
    view = pipe.compile(backend="eager", dynamic=False)  # one graph per shape
    assert view is pipe.compile(backend="eager", dynamic=False)  # kept: later runs reuse it
    assert view.transformer is pipe.transformer and pipe.compiled is None
    eager = _gen(pipe)
    first = _gen(view)
    assert torch.equal(first.tokens, eager.tokens) and first.nfe == eager.nfe
    shapes = dict(view.compiled.shapes)
    assert first.compile_seconds > 0 and {k[0] for k in shapes} == {"full", "partial"}
    again = _gen(view, seed=4)
    assert again.compile_seconds == 0.0 and view.compiled.shapes == shapes  # no recompile
    other = _gen(view, prompt="blue square on the left of a green circle")  # a new shape
    assert other.compile_seconds > 0 and len(view.compiled.shapes) > len(shapes)


def test_a_dynamic_view_compiles_no_graph_for_a_new_prompt_length(pipe: DiMOOPipeline) -> None:
    torch._dynamo.reset()
    view = pipe.compile(backend="eager", dynamic=True)
    assert _gen(view).compile_seconds > 0
    prompt = "blue square on the left of a green circle"  # another length, same structure
    other = _gen(view, prompt=prompt)
    assert other.compile_seconds == 0.0 and torch.equal(other.tokens, _gen(pipe, prompt=prompt).tokens)


def test_compile_rejects_bad_options(pipe: DiMOOPipeline) -> None:
    with pytest.raises(ValueError, match="backend"):
        pipe.compile(backend="tensorrt")
    with pytest.raises(ValueError, match="CUDA-graph"):
        CompiledPasses(mode="reduce-overhead")


def test_compile_node_returns_the_kept_compiled_view(pipe: DiMOOPipeline) -> None:
    from nodes.compile import CompileDiMOO
    from nodes.handles import DiMOOModel

    model = DiMOOModel(pipe=pipe, key=("tiny",), name="tiny")
    out = CompileDiMOO.execute(model=model, backend="eager", mode="default").args[0]
    assert out.pipe is pipe.compile(backend="eager") and out.pipe.compiled is not None
    assert out.key == model.key and out.pipe.transformer is pipe.transformer
    again = CompileDiMOO.execute(model=model, backend="eager", mode="default").args[0]
    assert again.pipe is out.pipe  # a later queue run reuses the compiled graphs
    with pytest.raises(ValueError, match="backend"):  # the schema's combo refuses it first
        CompileDiMOO.execute(model=model, backend="xla", mode="default")
    with pytest.raises(ValueError, match="Load DiMOO Model"):
        CompileDiMOO.execute(model="not a model", backend="eager", mode="default")
    schema = CompileDiMOO.define_schema()
    assert schema.node_id == "LADR_CompileDiMOO"
    assert all(getattr(i, "tooltip", None) for i in schema.inputs)


CFG = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, mlp_hidden_size=48,
                  vocab_size=96, max_sequence_length=128, rope_theta=500000.0)


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def _full_calls(compiled: CompiledPasses, model: LLaDAModel, lengths: list[tuple[int, ...]]
                ) -> int:
    """Graphs compiled over full passes of ``lengths``, each equal to the eager pass."""
    torch._dynamo.reset()
    before = _graphs()
    g = torch.Generator().manual_seed(0)
    for lens in lengths:
        rows = PackedRows.from_lengths(lens)
        ids = torch.randint(0, CFG.vocab_size, (rows.total,), generator=g)
        with torch.no_grad():
            torch.testing.assert_close(compiled.full(model, ids, rows),
                                       full_pass(model, ids, rows), rtol=1e-6, atol=1e-6)
    return _graphs() - before


def test_dynamic_passes_compile_once_across_packed_lengths() -> None:
    """A new prompt length or a cached pass's new count reuses the graph (dynamic, the
    default); one graph per shape with dynamic=False."""
    torch.manual_seed(0)
    model = LLaDAModel(CFG).eval()
    lengths = [(10, 7), (11, 7), (12, 8), (13, 9), (30, 21)]
    assert _full_calls(CompiledPasses(backend="eager"), model, lengths) == 1
    assert _full_calls(CompiledPasses(backend="eager", dynamic=False), model, lengths) == 5
    torch._dynamo.reset()
    passes, before = CompiledPasses(backend="eager"), _graphs()
    g = torch.Generator().manual_seed(1)
    hd, kvh = CFG.d_model // CFG.n_heads, 2
    for count, cache in ((3, 20), (4, 20), (6, 25), (2, 31)):  # counts and cache lengths vary
        kv = [[(torch.randn(cache + r, kvh, hd, generator=g),
                torch.randn(cache + r, kvh, hd, generator=g)) for _ in range(CFG.n_layers)]
              for r in range(2)]
        copy = [[(k.clone(), v.clone()) for k, v in row] for row in kv]
        ids = torch.randint(0, CFG.vocab_size, (2 * count,), generator=g)
        positions = torch.cat([torch.randperm(cache, generator=g)[:count] for _ in range(2)])
        with torch.no_grad():
            got = passes.partial(model, ids, positions, [count, count], kv)
            want = partial_pass(model, ids, positions, [count, count], copy)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(kv, copy, rtol=1e-6, atol=1e-6)  # caches written alike
    assert _graphs() - before == 1


def test_the_recompile_limit_is_named_once_and_later_shapes_run_eagerly(caplog) -> None:
    torch.manual_seed(0)
    model = LLaDAModel(CFG).eval()
    static = CompiledPasses(backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=2), \
            caplog.at_level(logging.WARNING, logger="ladr_core"):
        graphs = _full_calls(static, model, [(5,), (6,), (7,), (8,)])  # equal to eager
    assert graphs == 2 and static.limit_hit == {"full"}
    named = [r for r in caplog.records
             if r.name == "ladr_core" and "torch._dynamo.config.recompile_limit (2" in r.message]
    assert len(named) == 1  # once, though two calls met the limit
