"""Opt-in torch.compile of the transformer passes: plumbing, equality, one compile per shape."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import CompiledPasses, DiMOOPipeline, MLCacheConfig, load_dimoo


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
    view = pipe.compile(backend="eager")
    assert view is pipe.compile(backend="eager")  # kept: a later run reuses its graphs
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
