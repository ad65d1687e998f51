"""The sampler node's per-step callback reaches the host once per step: the preview's bytes,
the widget's masks and the counts travel together (nodes/events.py ``step_update``), and what
arrives is what the separate conversions give."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodes import events, host
from nodes.run import make_callback
from tests.kit.fakes import TablePipe, fake_record
from tests.kit.syncs import SyncCounter


def _pipe(k: int = 64) -> TablePipe:
    g = torch.Generator().manual_seed(1)
    return TablePipe(torch.rand(k, 4, 4, 3, generator=g))


def test_node_callback_makes_one_host_transfer_per_step() -> None:
    callback = make_callback(_pipe(), "1", host.Progress(16, None), [])  # the node's own
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
        # images finished + each image in flight's t_eff, over the images
        t_eff = [float(events.PROGRESS_SCHEDULE.gamma_inv(int(c) / masked.shape[1]))
                 for c in masked.sum(dim=1)]
        assert payload["progress"] == pytest.approx(sum(t_eff) / b)
        assert (payload["image"], payload["images"], payload["images_done"]) == (1, b, 0)


def test_a_rolling_batch_counts_finished_images_and_shows_one_in_flight() -> None:
    record = fake_record(3, (6, 5), 64, seed=9)
    record.update(items=[-1, 7, 4], batch=10, done=5)  # slot 0 free; images 8 and 5 in flight
    record["total"] = torch.tensor([30, 30, 12])  # image 5 generates 12 tokens (inpainting)
    payload = events.step_payload(record, "4")
    counts = record["masked"].sum(dim=1)
    flying = [float(events.PROGRESS_SCHEDULE.gamma_inv(int(c) / t))
              for c, t in zip(counts[1:], (30, 12), strict=True)]
    assert payload["progress"] == pytest.approx((5 + sum(flying)) / 10)
    assert (payload["image"], payload["images"], payload["images_done"]) == (8, 10, 5)
    assert payload["masked_pct"] == round(100.0 * int(counts[1]) / 30, 2)  # the shown slot
