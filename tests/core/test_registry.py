"""One strategy boundary: a name, a preset or an object becomes a Strategy once, through one
registry; a new strategy is selectable by name with no other edit."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import ClassVar

import pytest
import torch

from ladr_core import (
    DEFAULT_STEPS,
    LADR,
    PRESETS,
    Baseline,
    DiMOOPipeline,
    Prophet,
    preset_names,
    resolve_strategy,
    sample,
    strategy_class,
    strategy_names,
)
from ladr_core.registry import register_strategy, unregister_strategy
from ladr_core.step import Commit, Needs, RunInfo, Stats, Strategy
from ladr_core.strategies.select import effective_time, no_phase
from tests.kit.fakes import LocalityDenoiser, make_table

CORE = Path(__file__).resolve().parents[2] / "ladr_core"


def raster_step(run: RunInfo, step: int, masked: torch.Tensor, stats: Stats,
                noise: object) -> Commit:
    """Unmask the first ceil(N / T) still-masked positions in raster order."""
    per_step = -(-run.n // run.steps)
    rank = masked.long().cumsum(dim=1)
    new_masked = masked & (rank > per_step)
    t_eff = effective_time(masked, run)
    return Commit(new_masked, stats.sampled, torch.zeros_like(masked), t_eff, no_phase(t_eff))


@dataclass(frozen=True)
class Raster(Strategy):
    """A strategy defined outside the package: raster order, a fixed count per step."""

    name: ClassVar[str] = "raster-test"

    def needs(self) -> Needs:
        return Needs(frozenset())

    def begin(self, run: RunInfo) -> partial:
        return partial(raster_step, run)


@pytest.fixture
def raster() -> type[Raster]:
    register_strategy(Raster)
    yield Raster
    unregister_strategy(Raster.name)


def test_a_registered_strategy_is_selected_by_name_with_no_other_edit(raster) -> None:
    assert "raster-test" in strategy_names()
    assert resolve_strategy("raster-test") == Raster()
    den = LocalityDenoiser(make_table(1, 16, 8), (4, 4))
    records: list[dict] = []
    res = sample(den, (1, 4, 4), 4, strategy="raster-test", temperature=0.0,
                 callback=records.append)
    assert res.steps == 4 and records[0]["strategy"] == "raster-test"
    # raster order: the first 4 positions unmask at step 0, the next 4 at step 1, ...
    assert records[0]["unmasked"][0].tolist() == [True] * 4 + [False] * 12
    assert not records[-1]["masked"].any()


def test_a_registered_strategy_runs_through_generate(raster, dimoo_checkpoint: Path) -> None:
    from ladr_core import load_dimoo

    pipe: DiMOOPipeline = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    res = pipe.generate("a red circle", width=16, height=16, steps=4, strategy="raster-test",
                        decode=False)
    assert res.steps == 4 and res.nfe == 4


def test_a_second_class_under_a_taken_name_is_refused() -> None:
    @dataclass(frozen=True)
    class Impostor(Baseline):
        name: ClassVar[str] = "baseline"

    with pytest.raises(ValueError, match="strategy name 'baseline' is already registered by "
                       "ladr_core.strategies.baseline.Baseline"):
        register_strategy(Impostor)


def test_an_unknown_name_raises_listing_the_names() -> None:
    with pytest.raises(ValueError) as err:
        resolve_strategy("maskgit")
    text = str(err.value)
    assert str(list(strategy_names())) in text and "got 'maskgit'" in text
    assert {"baseline", "ladr", "prophet"} <= set(strategy_names())
    assert all(name in text for name in PRESETS)


@pytest.mark.parametrize(("spec", "expected"), [
    ("baseline", Baseline()), ("ladr", LADR()), ("prophet", Prophet()),
    ("nano", LADR.preset("nano")), ("paper", LADR())])
def test_names_and_presets_resolve_to_their_objects(spec: str, expected: Strategy) -> None:
    assert resolve_strategy(spec) == expected
    obj = LADR.preset("adaptive")
    assert resolve_strategy(obj) is obj  # an object passes through unchanged


def test_no_strategy_brings_a_step_count_of_its_own() -> None:
    """The schedule is the caller's: sample's default is DiMOO's 64 for every strategy and
    preset, and no strategy class has a steps field that could overrule it."""
    den = LocalityDenoiser(make_table(1, 16, 8), (4, 4))
    for spec in (*strategy_names(), *preset_names()):
        chosen = resolve_strategy(spec)
        assert "steps" not in {f.name for f in fields(chosen)}, spec
        records: list[dict] = []
        sample(den, (1, 4, 4), strategy=chosen, callback=records.append)
        assert records[0]["steps"] == DEFAULT_STEPS, spec


def test_run_takes_the_object_a_name_is_resolved_by_the_entry(dimoo_checkpoint: Path) -> None:
    """generate resolves a name once and hands run the object; run itself takes no name."""
    from ladr_core import load_dimoo

    pipe: DiMOOPipeline = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    job = pipe.prepare_text("a red circle", width=16, height=16)
    with pytest.raises(ValueError, match="strategy must be a Strategy object .*got 'nano'"):
        pipe.run(job, "nano")  # type: ignore[arg-type]
    by_name = pipe.generate("a red circle", width=16, height=16, strategy="nano", decode=False)
    by_object = pipe.run(job, LADR.preset("nano"), decode=False)
    assert by_name.steps == by_object.steps and torch.equal(by_name.tokens, by_object.tokens)


def test_the_generic_loop_imports_no_concrete_strategy() -> None:
    """Importing the loop (and the registry it resolves names with) loads no module of
    ladr_core.strategies: the registry imports them the first time a name is looked up."""
    code = ("import sys, ladr_core.sampling, ladr_core.registry, ladr_core.graphs; "
            "print([m for m in sys.modules if m.startswith('ladr_core.strategies')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=CORE.parent, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_strategy_written_in_the_strategies_package_is_selectable_by_its_name() -> None:
    """A module dropped into ladr_core/strategies registers its classes with no other edit: the
    registry walks the package, and a Strategy class written there that is not selectable by
    its name (a decorator forgotten, a name taken twice) is what a user would miss."""
    names = strategy_names()
    files = {p.stem for p in (CORE / "strategies").glob("*.py") if p.stem != "__init__"}
    assert {m.rsplit(".", 1)[-1] for m in sys.modules if m.startswith("ladr_core.strategies.")} \
        >= files  # every module was imported
    written = {cls for name, module in list(sys.modules.items())
               if name.startswith("ladr_core.strategies.")
               for cls in vars(module).values()
               if inspect.isclass(cls) and issubclass(cls, Strategy) and cls.__module__ == name
               and not inspect.isabstract(cls)}
    selectable = {cls for cls in written if cls.name in names and strategy_class(cls.name) is cls}
    assert written and selectable == written, written - selectable
    assert len(names) == len(written)
