"""The CUDA emulation itself (tests/kit/cuda_emu): it computes what the CPU computes, and it fails,
naming the file and line, exactly where a GPU run would fail or break the sampler's contract."""

from __future__ import annotations

import inspect

import pytest
import torch

from ladr_core import sample
from tests.kit.cuda_emu import CudaEmulationError, EmuTensor, emulated_cuda
from tests.kit.cuda_emu.memory import Allocator, round_size
from tests.kit.fakes import varied_denoiser
from tests.kit.syncs import sampler_reads

HERE = "tests/emulation/test_cuda_emu.py"


def line_of(fn, text: str) -> int:  # noqa: ANN001
    """The file line of the first line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def run_sample(denoise, strategy: str = "ladr", steps: int = 12, **kw):  # noqa: ANN001, ANN201
    gens = [torch.Generator(device="cuda").manual_seed(i) for i in range(2)]
    return sample(denoise, shape=(2, 16, 16), steps=steps, strategy=strategy, generator=gens,
                  **kw)


def test_tensors_say_cuda_and_compute_what_the_cpu_computes(emu) -> None:
    x = torch.arange(12.0).view(3, 4)
    d = x.to("cuda")
    assert isinstance(d, EmuTensor) and d.device == torch.device("cuda", 0) and d.is_cuda
    y = (d.softmax(-1) @ d.T)[1:, ::2]
    assert isinstance(y, EmuTensor) and torch.equal(y.cpu(), (x.softmax(-1) @ x.T)[1:, ::2])
    d[0, 1] = 7.0
    assert d[0, 1].item() == 7.0 and x[0, 1] == 1.0  # a copy, not the host tensor


def test_the_sampler_gives_the_cpu_tokens_with_one_read_per_step(emu) -> None:
    with torch.device("cpu"):
        want = sample(varied_denoiser(2, 256, 64), shape=(2, 16, 16), steps=12, strategy="ladr",
                      generator=[torch.Generator().manual_seed(i) for i in range(2)])
    got = run_sample(varied_denoiser(2, 256, 64, device=torch.device("cuda")))
    assert torch.equal(got.tokens.cpu(), want.tokens) and got.steps == want.steps
    assert sum(emu.loop_reads.values()) == sampler_reads(got.steps, 12)
    assert list(emu.loop_reads) == [next(iter(emu.loop_reads))]  # one site: sync_counts
    assert "ladr_core/sampling.py" in next(iter(emu.loop_reads))


def test_a_host_tensor_meeting_a_device_tensor_is_named() -> None:
    with emulated_cuda(), pytest.raises(CudaEmulationError) as err:
        torch.ones(3, device="cuda") + torch.ones(3)
    assert err.value.kind == "mismatch"
    line = line_of(test_a_host_tensor_meeting_a_device_tensor_is_named, "+ torch.ones(3)")
    assert err.value.where.startswith(f"{HERE}:{line} ")


def test_host_scalars_are_allowed_as_on_cuda(emu) -> None:
    out = torch.ones(3, device="cuda") * torch.tensor(2.0)
    assert torch.equal(out.cpu(), torch.full((3,), 2.0))


def read_in_loop(tokens: torch.Tensor, masked: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    if masked.sum().item() > 10_000:  # a host read in the denoiser: inside the step loop
        return base
    return base + 0.1 * tokens.unsqueeze(-1)


def list_index_in_loop(tokens: torch.Tensor, masked: torch.Tensor, base: torch.Tensor
                       ) -> torch.Tensor:
    return base[[0, 1]] + 0.0 * tokens.unsqueeze(-1)  # a Python list: a host index tensor


def upload_in_loop(tokens: torch.Tensor, masked: torch.Tensor, base: torch.Tensor
                   ) -> torch.Tensor:
    return base + torch.tensor([0.5], device=base.device)  # host data copied every step


@pytest.mark.parametrize(("fn", "text", "kind"), [
    (read_in_loop, ".item()", "read"), (list_index_in_loop, "[[0, 1]]", "h2d"),
    (upload_in_loop, "torch.tensor([0.5]", "h2d")])
def test_a_transfer_inside_the_step_loop_is_named(fn, text: str, kind: str) -> None:  # noqa: ANN001
    with emulated_cuda():
        base = torch.randn(2, 256, 64, generator=torch.Generator().manual_seed(0)).cuda()
        with pytest.raises(CudaEmulationError) as err:
            run_sample(lambda t, m: fn(t, m, base))
    assert err.value.kind == kind
    assert err.value.where.startswith(f"{HERE}:{line_of(fn, text)} ")


def test_pinned_non_blocking_copies_are_not_transfers_that_wait(emu) -> None:
    host = torch.arange(4.0).pin_memory()
    assert host.is_pinned() and not torch.arange(4.0).is_pinned()
    dev = torch.empty(4, device="cuda")
    before = sum(emu.h2d.values())
    dev.copy_(host, non_blocking=True)
    assert sum(emu.h2d.values()) == before and torch.equal(dev.cpu(), host)
    dev.copy_(torch.arange(4.0), non_blocking=True)  # pageable: the host waits
    assert sum(emu.h2d.values()) == before + 1


def test_float64_on_the_device_is_refused_beyond_per_item_scalars() -> None:
    with emulated_cuda():
        torch.zeros(4, dtype=torch.float64, device="cuda")  # per-item schedule scalars
        with pytest.raises(CudaEmulationError) as err:
            torch.zeros(64, 64, device="cuda").double()
    assert err.value.kind == "float64"


def test_a_cpu_generator_for_device_tensors_is_refused() -> None:
    with emulated_cuda(), pytest.raises(CudaEmulationError) as err:
        torch.empty(8, device="cuda").uniform_(generator=torch.Generator().manual_seed(0))
    assert err.value.kind == "mismatch" and "generator" in str(err.value)


def test_the_step_graph_is_captured_and_replayed_with_the_eager_tokens(emu, monkeypatch) -> None:
    from tests.kit.cuda_emu.torch_cuda import EmuGraph

    replays: list[int] = []
    real = EmuGraph.replay
    monkeypatch.setattr(EmuGraph, "replay", lambda g: replays.append(len(g.tape)) or real(g))
    denoise = varied_denoiser(2, 256, 64, device=torch.device("cuda"))
    graphed = run_sample(denoise, steps=24, cuda_graph=True)
    assert replays and min(replays) > 0  # a captured tape, replayed from step 1 on
    eager = run_sample(denoise, steps=24, cuda_graph=False)
    assert torch.equal(graphed.tokens.cpu(), eager.tokens.cpu())
    assert len(replays) == graphed.steps - 1


def test_module_to_keeps_the_parameters_and_moves_their_data(emu) -> None:
    layer = torch.nn.Linear(4, 3)
    weight = layer.weight
    x = torch.randn(2, 4)
    want = layer(x)
    layer.to("cuda")
    assert layer.weight is weight and isinstance(layer.weight, EmuTensor)
    assert torch.equal(layer(x.cuda()).detach().cpu(), want.detach())


def test_device_memory_is_counted_as_the_caching_allocator_counts_it(emu) -> None:
    before = torch.cuda.memory_allocated()
    a = torch.empty(1000, dtype=torch.uint8, device="cuda")
    assert torch.cuda.memory_allocated() - before == round_size(1000) == 1024
    view = a[10:]
    del a
    assert torch.cuda.memory_allocated() - before == 1024  # the view keeps the storage
    del view
    assert torch.cuda.memory_allocated() == before
    assert torch.cuda.memory_reserved() >= torch.cuda.max_memory_allocated()


def test_the_allocator_model_reuses_cached_blocks_and_releases_empty_segments() -> None:
    mem = Allocator()
    big = mem.malloc(12 * 2**20)  # over 10 MiB: a segment of its own, rounded to 2 MiB
    assert mem.reserved == 12 * 2**20
    mem.free(big)
    small = [mem.malloc(2**20 + 1) for _ in range(2)]  # large pool: reuse the cached segment
    assert mem.reserved == 12 * 2**20 and mem.allocated == 2 * round_size(2**20 + 1)
    for h in small:
        mem.free(h)
    mem.empty_cache()
    assert mem.reserved == 0 and mem.peak_reserved == 12 * 2**20


def test_data_assignment_moves_a_parameter_and_keeps_it(emu) -> None:
    """``param.data = device_view`` (block streaming's slots) and back, as on a GPU."""
    layer = torch.nn.Linear(3, 2)
    weight = layer.weight
    slot = torch.zeros(2, 3, device="cuda")
    layer.weight.data = slot[:, :]
    assert layer.weight is weight and layer.weight.device.type == "cuda"
    slot.fill_(2.0)  # the parameter is a view of the slot
    assert layer.weight.sum().item() == 12.0
    layer.weight.data = torch.ones(2, 3)
    assert layer.weight is weight and layer.weight.device.type == "cpu"


@pytest.mark.parametrize("loop", ["encode", "decode"])
def test_a_host_read_in_a_vq_loop_is_refused(loop: str, dimoo_checkpoint,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The VQ encode and decode loops run without the host waiting (where.py LOOPS: no
    documented read): a read there is refused and named, as in the sampler's loop."""
    from ladr_core.dimoo import load_dimoo
    from ladr_core.dimoo.model import vq as vq_module

    images = torch.rand(2, 32, 32, 3, generator=torch.Generator().manual_seed(0))
    with emulated_cuda() as emu:
        pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32)
        codes = pipe.encode_image(images)
        if loop == "encode":
            encode = pipe.vq.encode
            monkeypatch.setattr(pipe.vq, "encode", lambda x: (x.sum().item(), encode(x))[1])
            call = lambda: pipe.encode_image(images)  # noqa: E731
        else:
            chunk = vq_module._decode_chunk
            monkeypatch.setattr(vq_module, "_decode_chunk",
                                lambda vq, c: (c.sum().item(), chunk(vq, c))[1])
            side = 32 // pipe.vq_factor
            call = lambda: pipe.decode(codes, (side, side))  # noqa: E731
        with pytest.raises(CudaEmulationError, match=f"{loop}_\\w+\\(\\)'s VQ {loop} loop"):
            call()
    assert [v.kind for v in emu.violations] == ["read"]
