"""Block streaming (ladr_core.dimoo.model.offload): the copy-ahead logic, run with device "cpu" (the
copies are real clones, no CUDA stream), gives identical logits and keeps <= 2 blocks resident."""

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


class _Log:
    """Stand-ins for torch.cuda's Stream / Event / stream() / current_stream() that write what
    the block stream asks of them into one list, in order, beside its own trace."""

    def __init__(self) -> None:
        self.entries: list[tuple] = []
        self.events = 0
        log = self

        class Stream:
            def __init__(self, device=None, name: str = "copy") -> None:  # noqa: ANN001
                self.name = name

            def wait_event(self, event) -> None:  # noqa: ANN001
                log.entries.append(("wait", self.name, event.id))

        class Event:
            def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
                log.events += 1
                self.id = log.events

            def record(self, stream) -> None:  # noqa: ANN001
                log.entries.append(("record", stream.name, self.id))

        self.Stream, self.Event, self.compute = Stream, Event, Stream(name="compute")

    def stream(self, stream):  # noqa: ANN001, ANN201
        from contextlib import contextmanager

        @contextmanager
        def ctx():  # noqa: ANN202
            self.entries.append(("copy on", stream.name))
            yield

        return ctx()


def test_copies_wait_for_the_slot_and_compute_waits_for_the_copy(monkeypatch) -> None:
    """The CUDA ordering, with stand-in streams and events on the CPU: block i + 1's copy is
    issued after block i - 1 was freed and waits on the event recorded then; block i runs after
    the compute stream waited on its copy's event; results equal the resident model."""
    from ladr_core.dimoo.model.offload import BlockStream

    log = _Log()
    monkeypatch.setattr(torch.cuda, "Stream", log.Stream)
    monkeypatch.setattr(torch.cuda, "Event", log.Event)
    monkeypatch.setattr(torch.cuda, "stream", log.stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: log.compute)
    monkeypatch.setattr(torch.Tensor, "record_stream",
                        lambda t, s: log.entries.append(("keep", s.name)))
    ref, model = _pair(3)
    t = model.model.transformer
    stream = BlockStream(t.blocks, torch.device("cpu"), use_streams=True)
    assert log.entries == [("keep", "copy")] * 2  # the slots outlive the copies into them
    model._block_stream, model.device = stream, torch.device("cpu")
    stream.trace = log.entries  # one list: the stream's load/run/free among the waits
    ids = torch.randint(0, 96, (2, 7))
    for _ in range(2):  # the second pass waits for the slots the first one left
        freed_before = [e.id if e is not None else None for e in stream.freed]
        with torch.no_grad():
            torch.testing.assert_close(model(ids), ref(ids), rtol=0, atol=0)
        _check_order(log.entries, CFG.n_layers, freed_before)


def _check_order(entries: list[tuple], n: int, freed_before: list) -> None:
    at = {e: k for k, e in enumerate(entries) if e[0] in ("load", "run", "free")}
    for i in range(n):
        load, run = at[("load", i)], at[("run", i)]
        waited = next(e[2] for e in entries[load:] if e[0] == "wait" and e[1] == "copy") \
            if i >= 2 or freed_before[i % 2] is not None else None
        if i >= 2:  # the slot's last block (i - 2) was freed, and the copy waits on that
            freed = entries[at[("free", i - 2)] - 1]
            assert at[("free", i - 2)] < load and freed[:2] == ("record", "compute")
            assert waited == freed[2]
        elif waited is not None:
            assert waited == freed_before[i % 2]
        copy_on = next(k for k in range(load, len(entries)) if entries[k] == ("copy on", "copy"))
        copied = entries[copy_on + 1]
        assert copied[:2] == ("record", "copy")  # the copy's event, on the side stream
        assert ("wait", "compute", copied[2]) in entries[copy_on:run]
        if i + 1 < n:
            assert at[("load", i + 1)] < run  # one block ahead, never more
        if i + 2 < n:
            assert at[("load", i + 2)] > at[("free", i)]
