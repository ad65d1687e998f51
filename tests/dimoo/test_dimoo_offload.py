"""Block streaming (ladr_core.dimoo.model.offload): the copy-ahead logic, run with device "cpu" (the
copies are real clones, no CUDA stream), gives identical logits and keeps <= 2 blocks resident;
on the CUDA emulation (tests/kit/cuda_emu) with copies that land late, its copy stream and the
compute stream wait for each other."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core import load_dimoo
from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.offload import stream_blocks, unstream_blocks
from ladr_core.dimoo.model.transformer import LLaDAModel

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
    stale = iter(model.blocks)  # left unfinished and finalised later, during another pass
    next(stale)
    newer = iter(model.blocks)
    block = next(newer)
    assert stream.active == {0}
    stale.close()  # the garbage collector's finalisation: gives back nothing of the newer pass
    assert stream.active == {0} and not _inside(block.q_proj.weight, stream.flats[0])
    newer.close()
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


def _inside(t: torch.Tensor, flat: torch.Tensor) -> bool:
    start = flat.data_ptr()
    return start <= t.data_ptr() and t.data_ptr() + t.numel() * t.element_size() <= \
        start + flat.numel()


def test_blocks_run_from_two_fixed_slots_and_grad_mode_gets_buffers_of_its_own() -> None:
    ref, model = _pair(2)
    stream = stream_blocks(model, "cpu")
    ids = torch.randint(0, 96, (1, 9))
    with torch.no_grad():
        for i, block in enumerate(model.blocks):  # every weight is a view of slot i % 2
            assert all(_inside(p, stream.device_slots[i % 2]) for p in block.parameters())
    assert len(stream.device_slots) == 2
    it = iter(model.blocks)  # autograd on: a backward pass may keep the weights
    block = next(it)
    assert not any(_inside(p, s) for p in block.parameters() for s in stream.device_slots)
    del it
    torch.testing.assert_close(model(ids), ref(ids), rtol=0, atol=0)


def test_arenas_are_powers_of_two_holding_whole_blocks_in_order() -> None:
    from ladr_core.dimoo.model.offload import arena_plan

    block = 436_224_000  # about the 8B model's bf16 block (218 M weights)
    sizes = [block] * 32 + [5_000, 1 << 20]
    plan = arena_plan(sizes)
    assert [i for _, group in plan for i in group] == list(range(len(sizes)))
    for cap, group in plan:
        assert cap & (cap - 1) == 0 and sum(sizes[i] for i in group) <= cap
    per_block = sum(1 << (s - 1).bit_length() for s in sizes)  # each block rounded up alone
    assert sum(cap for cap, _ in plan) < 1.1 * sum(sizes) < per_block
    assert arena_plan([]) == [] and arena_plan([0]) == [(512, [0])]


def _streamed_on_emulated_cuda(seed: int, copy_waits: bool = True) -> None:
    """The streamed model on the CUDA emulation with copies that land late (its copy stream,
    events and waits are the emulation's: tests/kit/cuda_emu/ordering.py) against the resident
    model on the CPU, two passes (the second copies into slots the first one left);
    ``copy_waits=False``: the copy stream skips its waits."""
    from tests.kit.cuda_emu import emulated_cuda

    ref, model = _pair(seed)
    ids = torch.randint(0, 96, (2, 7))
    with torch.no_grad():
        want = ref(ids)
    with emulated_cuda(completion="late") as emu, torch.no_grad():
        stream = stream_blocks(model, "cuda")
        assert stream.stream is not None  # the CUDA path: a copy stream and events
        if not copy_waits:
            stream.stream.wait_event = lambda event: None
        for _ in range(2):
            torch.testing.assert_close(model(ids.cuda()).cpu(), want, rtol=0, atol=0)
        assert _resident_max(stream.trace) == 2 and not emu.violations


def test_copies_wait_for_their_slot_and_compute_waits_for_the_copy() -> None:
    """On a GPU the copy of block i runs on a side stream: it must wait until block i - 2 (the
    slot's last block) ran, and block i must wait for its copy. With copies that land late
    the streamed model gives the resident model's logits, and a copy stream that waits for
    nothing is named where it overwrites a slot still in use."""
    from tests.kit.cuda_emu import CudaEmulationError

    _streamed_on_emulated_cuda(3)
    with pytest.raises(CudaEmulationError) as err:
        _streamed_on_emulated_cuda(3, copy_waits=False)
    assert err.value.kind == "order" and "overwrites" in str(err.value)
    assert err.value.where.startswith("ladr_core/dimoo/model/offload.py:")
