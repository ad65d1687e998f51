"""The prompt rows of a set of items, packed for one transformer pass (packed.py).

`RowTable` keeps the real tokens of each row of a `PromptBatch` (prompt.py) on the host;
`RowTable.pack(items)` lays out just those items' rows, [cond rows] + [uncond rows], back to
back, with each row's image code slots as packed positions: a finished item's rows leave the
pack and a joining item's enter it (a rolling batch). A pack reaches the device in one copy
(pinned on CUDA, without waiting for the host).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...devices import to_device
from ..model.packed import PackedRows
from .prompt import PromptBatch

__all__ = ["Pack", "RowTable"]


@dataclass(frozen=True)
class Pack:
    """The rows of `items` packed: ids [T] (code slots hold the mask id), `rows`, the code
    slots' packed (`code_pos` [R, N]) and in-row (`code_local`) positions, `row_items` [R]."""

    items: tuple[int, ...]
    ids: torch.Tensor
    rows: PackedRows
    code_pos: torch.Tensor
    code_local: torch.Tensor
    row_items: tuple[int, ...]

    @property
    def real_tokens(self) -> int:
        return self.rows.total


class RowTable:
    """Every row's real tokens (host) and where its code slots are; packs any set of items."""

    def __init__(self, batch: PromptBatch, branches: int) -> None:
        mask = batch.attention_mask.bool()
        self.batch, self.branches = batch.batch, branches
        self.row_ids = [batch.input_ids[r][mask[r]] for r in range(batch.input_ids.shape[0])]
        offsets = batch.layout.code_offsets()
        self.code_local = [len(ids) - batch.layout.length + offsets for ids in self.row_ids]

    def rows_of(self, items: tuple[int, ...]) -> list[int]:
        """Row indices of `items`: their cond rows, then (with CFG) their uncond rows."""
        return [j + b * self.batch for b in range(self.branches) for j in items]

    def pack(self, items: tuple[int, ...], device: torch.device) -> Pack:
        rows = self.rows_of(items)
        packed = PackedRows.from_lengths([len(self.row_ids[r]) for r in rows])
        local = torch.stack([self.code_local[r] for r in rows])
        code_pos = packed.starts[:, None] + local
        parts = [torch.cat([self.row_ids[r] for r in rows]), code_pos, local, packed.starts,
                 packed.positions]
        flat = torch.cat([t.reshape(-1).long() for t in parts])
        flat = to_device(flat, device)  # one copy that need not wait for the host
        ids, code_pos, local, starts, positions = (
            v.view(t.shape) for v, t in zip(flat.split([t.numel() for t in parts]), parts,
                                            strict=True))
        return Pack(items, ids, replace(packed, starts=starts, positions=positions), code_pos,
                    local, tuple(r % self.batch for r in rows))
