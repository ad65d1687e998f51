"""At most one host synchronisation per sampling step, for every strategy.

Syncs are counted at two levels: aten ops that need a value or shape on the host
(TorchDispatchMode) and Tensor methods that copy to host memory (TorchFunctionMode: `.tolist()`
on a CPU tensor dispatches no aten op, but on an accelerator it is a device -> host sync).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from reference_official import LocalityDenoiser, make_table
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.common import strategy_from
from ladr_core import LADR, PRESETS, LADRPolicy, resolve_strategy, sample, strategy_names
from ladr_core.registry import _REGISTRY

# Every registered strategy beyond the three the lists below spell out, with its defaults
# (a new strategy joins these checks by registering).
OTHERS = [n for n in strategy_names() if n not in ("baseline", "ladr", "prophet")]

aten = torch.ops.aten
SYNC_OPS = {aten._local_scalar_dense, aten.nonzero, aten.masked_select, aten.item,
            aten.equal, aten.is_nonzero, aten._unique2, aten.unique_consecutive,
            aten.repeat_interleave}
INDEX_OPS = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}


HOST_METHODS = {"tolist", "numpy", "__array__"}


class AtenSyncs(TorchDispatchMode):
    """Records ops that force a device -> host round trip: .item()/bool(tensor)/nonzero/
    masked_select/boolean-mask indexing/copies to the CPU from another device."""

    def __init__(self, syncs: list[str]) -> None:
        super().__init__()
        self.syncs = syncs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        if packet in SYNC_OPS:
            self.syncs.append(str(func))
        elif packet in INDEX_OPS:
            indices = args[1] if len(args) > 1 else []
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or []):
                self.syncs.append(f"{func} with a boolean mask")
        elif packet is aten._to_copy and isinstance(args[0], torch.Tensor):
            dev = kwargs.get("device")
            if dev is not None and torch.device(dev).type == "cpu" and args[0].device.type != "cpu":
                self.syncs.append(f"{func} to cpu")
        return func(*args, **kwargs)


class HostCopies(TorchFunctionMode):
    """Records Tensor.tolist()/numpy()/__array__() calls (no aten op on a CPU tensor)."""

    def __init__(self, syncs: list[str]) -> None:
        super().__init__()
        self.syncs = syncs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_METHODS:
            self.syncs.append(f"Tensor.{name}")
        return func(*args, **(kwargs or {}))


@contextmanager
def count_syncs() -> Iterator[list[str]]:
    """Every host sync made inside the block, in order."""
    syncs: list[str] = []
    with HostCopies(syncs), AtenSyncs(syncs):
        yield syncs


def test_counter_detects_the_syncs_it_claims_to() -> None:
    x = torch.rand(6)
    with count_syncs() as syncs:
        x.sum().item()
        bool(x.any())
        x[x > 0.5]
        torch.nonzero(x)
        x.tolist()
        x[torch.tensor([0, 2])]  # integer indexing is not a sync
        x.argsort(stable=True)[:3]  # neither is a sort or a slice by a host int
    assert len(syncs) == 5
    assert syncs[-1] == "Tensor.tolist"


@pytest.mark.parametrize(
    ("strategy", "policy"),
    [("baseline", None), ("prophet", None), ("ladr", LADRPolicy()),
     ("ladr", LADRPolicy(candidates="non_neighbors")), ("ladr", LADRPolicy(candidates="random")),
     ("ladr", LADRPolicy(metric="random")), ("ladr", LADRPolicy(metric="confidence")),
     ("ladr", LADRPolicy(selection="gumbel", rescue_token="argmax", seen_only=True)),
     ("ladr", PRESETS["adaptive"].policy),
     *[(resolve_strategy(name), None) for name in OTHERS]],
)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_at_most_one_host_sync_per_step(strategy, policy, temperature) -> None:
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    with count_syncs() as syncs:
        res = sample(den, (2, 8, 8), 12, strategy=strategy_from(strategy, policy),
                     temperature=temperature, generator=gens, callback=lambda r: None)
    assert res.steps >= 2
    assert len(syncs) <= res.steps, syncs
    # Exactly the one transfer of the masked counts per step (none after the last step), which
    # serves the early exit and sizes the next step's masked-row gather and noise draws.
    assert syncs == ["Tensor.tolist"] * (res.steps if res.steps < 12 else 11)


LOOP_MODULES = sorted({"sampling.py", "baseline.py", "prophet.py", "ladr.py", "rescue.py",
                       "select.py", "step.py", "noise.py", "schedules.py", "validation.py",
                       "policy.py", "registry.py", "stats.py",
                       *(Path(sys.modules[_REGISTRY[n].__module__].__file__).name
                         for n in strategy_names())})
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
    src = (Path(__file__).resolve().parents[1] / "ladr_core" / module).read_text()
    assert _host_calls(ast.parse(src)) == ALLOWED_HOST_CALLS.get(module, [])


class HostData(TorchDispatchMode):
    """Records tensors made from host (Python) data: torch.tensor / new_tensor (aten.lift_fresh).
    On an accelerator each is a host -> device copy from pageable memory, which waits for the
    host (a fixed sync per run); on the CPU it is invisible to the sync counters above."""

    def __init__(self, made: list[str]) -> None:
        super().__init__()
        self.made = made

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (aten.lift_fresh, aten.lift_fresh_copy):
            self.made.append(str(func))
        return func(*args, **(kwargs or {}))


def test_counter_detects_host_data() -> None:
    made: list[str] = []
    with HostData(made):
        torch.tensor([0.05, 0.05, -1.0])
        torch.where(torch.ones(2, dtype=torch.bool), 0.5, torch.zeros(2))  # a kernel scalar
        torch.arange(1, 5, dtype=torch.float64) / 4
    assert made == ["aten.lift_fresh.default"]


@pytest.mark.parametrize("strategy", ["baseline", "prophet", *sorted(PRESETS), *OTHERS])
def test_sample_copies_no_host_data_to_the_device(strategy) -> None:
    """No fixed sync inside sample() on an accelerator: policy tables, the baseline keep
    table and the Halton order are built on the device, per-phase values enter kernels as
    scalars."""
    chosen = resolve_strategy(strategy) if strategy in strategy_names() else LADR.preset(strategy)
    den = LocalityDenoiser(make_table(2, 64, 12, seed=1), (8, 8))
    gens = [torch.Generator().manual_seed(i) for i in range(2)]
    made: list[str] = []
    with HostData(made):
        sample(den, (2, 8, 8), 12, strategy=chosen, temperature=1.0, generator=gens)
    assert made == []
