"""On a CUDA GPU: the sampler's one sync per step, counted by CUDA itself, and the GPU path
giving the CPU's tokens. Skipped without a GPU (CI has none); run on one with
``python -m pytest tests/core/test_gpu.py``."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from support import strategy_from

from ladr_core import LADR, PRESETS, sample
from ladr_core.stats import top2_
from tests.kit.syncs import cuda_syncs, sampler_reads

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CASES = [("baseline", None), ("prophet", None), ("ladr", None), ("ladr", "nano"),
         ("ladr", "adaptive")]


def logits_for(b: int, n: int, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, n, k, generator=g) * 4.0


def varied(base: torch.Tensor):  # noqa: ANN201
    """Logits that depend on the tokens decoded so far (a constant denoiser hides bugs)."""
    shift = torch.linspace(-1.0, 1.0, base.shape[-1], device=base.device)

    def denoise(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        return base + shift[tokens].unsqueeze(-1) * (~masked).unsqueeze(-1)

    return denoise


@pytest.mark.parametrize(("strategy", "preset"), CASES)
@pytest.mark.parametrize("batch", [1, 2])
def test_one_cuda_sync_per_step(strategy: str, preset: str | None, batch: int) -> None:
    steps = 12
    denoise = varied(logits_for(batch, 256, 64).cuda())
    gens = [torch.Generator(device="cuda").manual_seed(i) for i in range(batch)]
    out: list = []

    def run() -> None:
        out.append(sample(denoise, shape=(batch, 16, 16), steps=steps, strategy=strategy_from(strategy, PRESETS[preset].policy if preset else None), generator=gens))

    # The first count of a process sees one sync inside torch.cuda itself
    # (torch/cuda/__init__.py, lab/results/host_syncs_<gpu>.json): count a second run.
    cuda_syncs(run)
    syncs = cuda_syncs(run)
    assert syncs == sampler_reads(out[1].steps, steps)


@pytest.mark.parametrize(("strategy", "preset"), CASES)
def test_greedy_tokens_match_the_cpu(strategy: str, preset: str | None) -> None:
    """Temperature 0 draws nothing, so the GPU run must give the CPU run's tokens."""
    base = logits_for(2, 256, 64)
    runs = [sample(varied(base.to(device)), shape=(2, 16, 16), steps=12, strategy=strategy_from(strategy, PRESETS[preset].policy if preset else None), temperature=0.0,
                   device=device)
            for device in ("cpu", "cuda")]
    assert runs[0].steps == runs[1].steps
    assert torch.equal(runs[0].tokens, runs[1].tokens.cpu())


def test_top2_matches_topk_on_the_gpu() -> None:
    x = torch.softmax(logits_for(1, 512, 8192)[0].cuda(), dim=-1)
    x[3, 5] = x[3, 7] = x[3].max() + 1.0  # a tie for the top
    want = x.topk(2, dim=-1)
    first, second, index = top2_(x.clone())
    assert torch.equal(first, want.values[:, 0]) and torch.equal(second, want.values[:, 1])
    assert torch.equal(index[torch.arange(512) != 3], want.indices[torch.arange(512) != 3, 0])
    assert second[3] == first[3]


@pytest.mark.skipif(importlib.util.find_spec("diffusers") is None, reason="needs diffusers")
@pytest.mark.parametrize("strategy", ["baseline", "ladr"])
def test_generate_adds_at_most_one_sync(dimoo_checkpoint, strategy: str) -> None:  # noqa: ANN001
    import ladr_core

    pipe = ladr_core.load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.bfloat16)
    out = []
    syncs = cuda_syncs(lambda: out.append(pipe.generate(
        "a red circle", width=16, height=16, steps=8, strategy=strategy, seed=0)))
    assert out[0].images.device.type == "cuda"
    assert syncs - sampler_reads(out[0].steps, 8) <= 1


GRAPH_CASES = [None, "nano", "adaptive", "delayed", "ablation_random_candidates",
               "ablation_random_metric"]


@pytest.mark.parametrize("preset", GRAPH_CASES)
@pytest.mark.parametrize(("batch", "temperature"), [(1, 1.0), (2, 1.0), (2, 0.0)])
def test_graphed_rule_gives_the_eager_tokens(preset: str | None, batch: int,
                                             temperature: float) -> None:
    """LADR's middle steps replay one CUDA graph (ladr_core.graphs): same tokens, same steps,
    same records as the eager rule, and no extra sync."""
    base = logits_for(batch, 256, 64).cuda()

    def run(enabled: bool) -> tuple:
        gens = [torch.Generator(device="cuda").manual_seed(i) for i in range(batch)]
        records: list = []
        res = sample(varied(base), shape=(batch, 16, 16), steps=24, strategy=strategy_from("ladr", PRESETS[preset].policy if preset else None),
                     temperature=temperature, generator=gens, cuda_graph=enabled,
                     callback=lambda r: records.append((r["masked"], r["rescued"], r["tokens"])))
        return res, records

    eager, eager_records = run(False)
    graphed, graphed_records = run(True)
    assert graphed.steps == eager.steps and graphed.steps > 3  # the graph replayed
    assert torch.equal(graphed.tokens, eager.tokens)
    for a, b in zip(eager_records, graphed_records, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_graphed_run_keeps_one_sync_per_step() -> None:
    denoise = varied(logits_for(1, 256, 64).cuda())
    out: list = []

    def run() -> None:
        out.append(sample(denoise, shape=(1, 16, 16), steps=24, strategy=LADR(PRESETS["nano"].policy),
                          generator=torch.Generator(device="cuda").manual_seed(0)))

    cuda_syncs(run)
    assert cuda_syncs(run) == sampler_reads(out[1].steps, 24)
