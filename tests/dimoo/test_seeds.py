"""Distinct seeds draw distinct noise.

Findings (docs/reports/SEEDS.md): torch's CPU generator keeps only the low 32 bits of a seed, so seeds
2**32 apart drew the same noise (a seeding defect, fixed by pipeline.generator_seed); apart from
that, identical nano images from distinct seeds come from the model (near one-hot predictions),
not from the seeding. With a flat model every seed must give its own image.
"""

from __future__ import annotations

import torch

from ladr_core.dimoo.runs import generator_seed, item_generator

FAR_APART = [0, 1, 42, 2**31 - 1, 2**31, 2**32, 2**32 + 42, 2**53 - 1, 2**63 + 42, 2**64 - 2]


def test_each_item_gets_its_own_generator_with_the_full_seed(pipe, monkeypatch) -> None:
    seen: list[list[torch.Generator]] = []
    from ladr_core.dimoo import runs  # the run routine, which calls the sampler

    real = runs.sample

    def spy(*a, **kw):
        seen.append(kw["generator"])
        return real(*a, **kw)

    monkeypatch.setattr(runs, "sample", spy)
    for seed in FAR_APART:
        pipe.generate("red circle", width=16, height=16, steps=2, seed=seed, batch_size=2,
                      decode=False)
    starts = [[g.initial_seed() for g in gens] for gens in seen]
    cpu = torch.device("cpu")
    assert starts == [[generator_seed(s, cpu), generator_seed(s + 1, cpu)] for s in FAR_APART]
    assert all(gens[0] is not gens[1] for gens in seen)
    assert [generator_seed(s, cpu) for s in FAR_APART[:5]] == FAR_APART[:5]  # unchanged < 2**32
    assert generator_seed(2**40, torch.device("cuda")) == 2**40  # Philox keeps 64 bits


def test_cpu_generators_of_seeds_2_to_the_32_apart_differ() -> None:
    """torch's CPU generator keeps 32 bits of manual_seed; item_generator keeps them apart."""
    same = [torch.rand(4, generator=torch.Generator().manual_seed(s)) for s in (5, 5 + 2**32)]
    assert torch.equal(*same)  # the torch fact behind the defect
    cpu = torch.device("cpu")
    draws = {float(torch.rand(1, generator=item_generator(s, cpu))) for s in FAR_APART}
    assert len(draws) == len(FAR_APART)


def test_a_flat_model_gives_every_seed_its_own_image(pipe, monkeypatch) -> None:
    """Uniform logits: the tokens are the noise alone, so equal grids would mean equal noise."""
    flat = lambda hidden, rows=None: torch.zeros(*hidden.shape[:-1], pipe.ids.codebook_size)  # noqa: E731
    monkeypatch.setattr(pipe.transformer, "project", flat)
    grids = [tuple(pipe.generate("red circle", width=16, height=16, steps=4, seed=s,
                                 decode=False).tokens[0].tolist()) for s in FAR_APART]
    assert len(set(grids)) == len(FAR_APART)
