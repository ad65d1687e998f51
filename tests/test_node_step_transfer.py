"""The sampler node's per-step callback reaches the host once per step: the preview's bytes,
the widget's masks and the counts travel together (nodes/events.py ``step_update``), and what
arrives is what the separate conversions give."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.common import SyncCounter
from benchmarks.preview_cost import _TablePipe, fake_record, node_callback
from nodes import events


def _pipe(k: int = 64) -> _TablePipe:
    g = torch.Generator().manual_seed(1)
    return _TablePipe(torch.rand(k, 4, 4, 3, generator=g))


def test_node_callback_makes_one_host_transfer_per_step() -> None:
    callback = node_callback(_pipe())
    for b in (1, 3):
        record = fake_record(b, (6, 5), 64, seed=b)
        with SyncCounter() as syncs:
            callback(record)
        assert syncs.total == 1, dict(syncs.counts)


def test_step_update_gives_the_separate_conversions() -> None:
    pipe = _pipe()
    for b, phase in ((1, True), (2, False)):
        record = fake_record(b, (6, 5), 64, seed=b)
        if not phase:
            del record["phase"]
        preview = pipe.preview(record["tokens"][:1], record["masked"][:1], record["grid"])[0]
        payload, image = events.step_update(record, "4", preview)
        assert np.array_equal(np.asarray(image), np.asarray(events.to_pil(preview)))
        assert payload == events.step_payload(record, "4")
        masked = record["masked"]
        assert payload["masked_pct"] == round(100.0 * int(masked[0].sum()) / masked.shape[1], 2)
        assert payload["rescued"] == int(record["rescued"][0].sum())
        assert payload["phase"] == ("structure" if phase else "n/a")
        slowest = int(masked.sum(dim=1).max()) / masked.shape[1]
        assert payload["progress"] == float(events.PROGRESS_SCHEDULE.gamma_inv(slowest))
