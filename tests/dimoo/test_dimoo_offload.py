"""Block streaming (ladr_core.dimoo.model.offload): the copy-ahead logic, run with device "cpu" (the
copies are real clones, no CUDA stream), gives identical logits and keeps <= 2 blocks resident."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core import load_dimoo
from ladr_core.dimoo import LLaDAConfig, LLaDAModel, stream_blocks, unstream_blocks

CFG = LLaDAConfig(d_model=32, n_heads=4, n_kv_heads=2, n_layers=4, mlp_hidden_size=48,
                  vocab_size=96, max_sequence_length=64, rope_theta=500000.0)


def _pair(seed: int = 0) -> tuple[LLaDAModel, LLaDAModel]:
    torch.manual_seed(seed)
    ref = LLaDAModel(CFG).eval()
    streamed = LLaDAModel(CFG, init_std=None).eval()
    streamed.load_state_dict(ref.state_dict())
    return ref, streamed


def _resident_max(trace: list[tuple[str, int]]) -> int:
    """Most blocks loaded-or-running and not yet freed at any point of the trace."""
    live: set[int] = set()
    most = 0
    for event, i in trace:
        if event == "load":
            live.add(i)
        elif event == "free":
            live.discard(i)
        most = max(most, len(live))
    return most


def test_streamed_forward_equals_resident_and_prefetches_one_ahead() -> None:
    ref, model = _pair()
    stream = stream_blocks(model, "cpu")
    assert stream.stream is None and model.device == torch.device("cpu")  # no CUDA stream on CPU
    ids = torch.randint(0, 96, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), ref(ids), rtol=0, atol=0)
    trace = stream.trace
    assert trace[:3] == [("load", 0), ("load", 1), ("run", 0)]  # i + 1 copies before i runs
    for i in range(1, CFG.n_layers):
        assert trace.index(("load", i)) < trace.index(("run", i - 1)) < trace.index(("run", i))
    assert [e for e in trace if e[0] == "run"] == [("run", i) for i in range(CFG.n_layers)]
    assert _resident_max(trace) == 2 and not stream.active


def test_stored_weights_are_back_in_place_after_each_pass() -> None:
    _, model = _pair()
    stream = stream_blocks(model, "cpu")
    before = [p.data_ptr() for p in model.model.transformer.blocks.parameters()]
    with torch.no_grad():
        model(torch.randint(0, 96, (1, 6)))
    after = [p.data_ptr() for p in model.model.transformer.blocks.parameters()]
    assert before == after  # the executed copies were clones; storage is restored
    assert stream.stored[0][0].data_ptr() == before[0]


def test_ml_cache_pass_and_an_interrupted_pass_also_stream() -> None:
    ref, model = _pair(1)
    stream = stream_blocks(model, "cpu")
    ids = torch.randint(0, 96, (1, 12))
    index = torch.tensor([[1, 4, 7]])
    with torch.no_grad():
        _, kv_ref = ref.hidden_states(ids, return_kv=True)
        _, kv = model.hidden_states(ids, return_kv=True)
        want = ref.hidden_states_partial(ids, index, kv_ref)
        got = model.hidden_states_partial(ids, index, kv)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    it = iter(model.blocks)
    next(it)  # a pass stopped after its first block (an exception, an interrupt)
    assert stream.active == {0}
    del it
    assert not stream.active
    unstream_blocks(model)
    assert model.device is None and model._block_stream is None


def test_load_dimoo_offload_blocks_generates_the_same_tokens(dimoo_checkpoint: Path) -> None:
    ref = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32, offload_blocks=True)
    kw = dict(width=16, height=16, steps=4, seed=3, decode=False)
    assert torch.equal(pipe.generate("a red circle", **kw).tokens,
                       ref.generate("a red circle", **kw).tokens)
    assert pipe.transformer._block_stream.trace  # it streamed
    with pytest.raises(ValueError, match="offload_blocks"):
        load_dimoo(dimoo_checkpoint, offload_blocks="yes")
