"""At most one host synchronisation per sampling step, for every strategy.

Syncs are counted by tests.kit.syncs.SyncCounter (the benchmarks' counter too): aten ops that need
a value or shape on the host, and Tensor methods that copy to host memory (`.tolist()` on a CPU
tensor dispatches no aten op, but on an accelerator it is a device -> host sync). The modules of
the loop are also scanned for host-transfer calls, and none may copy host data to the device.
"""

from __future__ import annotations

import ast

import pytest
import torch
from support import ROOT, strategy_from

from ladr_core import LADR, PRESETS, LADRPolicy, resolve_strategy, sample, strategy_names
from tests.kit.fakes import LocalityDenoiser, make_table
from tests.kit.syncs import HostData, SyncCounter, sampler_reads

# Every registered strategy beyond the three the lists below spell out, with its defaults
# (a new strategy joins these checks by registering).
OTHERS = [n for n in strategy_names() if n not in ("baseline", "ladr", "prophet")]


@pytest.mark.parametrize(
    ("strategy", "policy"),
    [("baseline", None), ("prophet", None), ("ladr", LADRPolicy()),
     ("ladr", LADRPolicy(candidates="non_neighbors")), ("ladr", LADRPolicy(candidates="random")),
     ("ladr", LADRPolicy(metric="random")), ("ladr", LADRPolicy(metric="confidence")),
     ("ladr", LADRPolicy(selection="gumbel", rescue_token="argmax", seen_only=True)),
     ("ladr", PRESETS["adaptive"].policy),
     *[(name, None) for name in OTHERS]],
)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_at_most_one_host_sync_per_step(strategy, policy, temperature) -> None:
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    with SyncCounter() as syncs:
        res = sample(den, (2, 8, 8), 12, strategy=strategy_from(strategy, policy),
                     temperature=temperature, generator=gens, callback=lambda r: None)
    assert res.steps >= 2
    assert syncs.total <= res.steps, syncs.counts
    # Exactly the one transfer of the masked counts per step (none after the last step), which
    # serves the early exit and sizes the next step's masked-row gather and noise draws.
    assert dict(syncs.counts) == {"Tensor.tolist": sampler_reads(res.steps, 12)}


CORE = ROOT / "ladr_core"
LOOP_MODULES = sorted(str(p.relative_to(CORE)) for p in [*CORE.glob("*.py"),
                                                          *CORE.glob("strategies/*.py")]
                      if p.name not in ("__init__.py", "_lazy.py"))
"""The sampler, its strategies and their helpers: every module directly in ladr_core/ and in
ladr_core/strategies/ (the runtime's packages, dimoo/ and calibrate/, call the loop; they are
not part of it)."""
HOST_CALLS = {"tolist", "item", "cpu", "numpy", "nonzero", "masked_select"}


# The documented exceptions: the loop's one host sync per step (see sync_counts), and with known
# tokens (inpainting) one transfer before the loop (their per-item counts and range, _Run.start).
ALLOWED_HOST_CALLS = {"sampling.py": [("start", "tolist"), ("sync_counts", "tolist")]}


def _host_calls(tree: ast.AST, scope: str = "<module>") -> list[tuple[str, str]]:
    """(enclosing function, method) for every call of a HOST_CALLS method under `tree`."""
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope = tree.name
    found = []
    if (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Attribute)
            and tree.func.attr in HOST_CALLS):
        found.append((scope, tree.func.attr))
    for child in ast.iter_child_nodes(tree):
        found += _host_calls(child, scope)
    return found


@pytest.mark.parametrize("module", LOOP_MODULES)
def test_loop_modules_call_no_host_transfer_methods(module) -> None:
    """tolist()/cpu() on CPU tensors are invisible to the dispatch mode; forbid them statically,
    except the one per-step transfer of the masked counts in sampling.py's sync_counts and the
    one transfer before the loop when sampling starts from known tokens."""
    src = (CORE / module).read_text()
    assert _host_calls(ast.parse(src)) == ALLOWED_HOST_CALLS.get(module, [])


def test_counter_detects_host_data() -> None:
    with HostData() as made:
        torch.tensor([0.05, 0.05, -1.0])
        torch.where(torch.ones(2, dtype=torch.bool), 0.5, torch.zeros(2))  # a kernel scalar
        torch.arange(1, 5, dtype=torch.float64) / 4
    assert made.made == ["aten.lift_fresh.default"]


@pytest.mark.parametrize("strategy", ["baseline", "prophet", *sorted(PRESETS), *OTHERS])
def test_sample_copies_no_host_data_to_the_device(strategy) -> None:
    """No fixed sync inside sample() on an accelerator: policy tables, the baseline keep
    table and the Halton order are built on the device, per-phase values enter kernels as
    scalars."""
    chosen = resolve_strategy(strategy) if strategy in strategy_names() else LADR.preset(strategy)
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    with HostData() as made:
        sample(den, (2, 8, 8), 12, strategy=chosen, temperature=1.0, generator=gens)
    assert made.made == []
