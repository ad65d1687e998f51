"""The live-preview renderer (web/ladr_preview_draw.js) in real headless Chromium.

Payloads are built by the sampler's own `nodes.events.step_payload`, so this also pins the
Python -> JS payload contract. Pixels are read back from the canvas: decoded cells, still-masked
cells and cells rescued this step each show their own colour (the picture itself is the
progress-bar preview, not this widget).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
from support.browser import require_browser, widget_record

from nodes import events

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "web" / "render_widget.mjs"

pytestmark = pytest.mark.browser


def _render(payloads: list, tmp_path: Path, shot: Path | None = None) -> list[dict]:
    require_browser()
    src, out = tmp_path / "payloads.json", tmp_path / "out.json"
    src.write_text(json.dumps(payloads))
    cmd = ["node", str(HARNESS), str(src), str(out)] + ([str(shot)] if shot else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


def _hex(color: str) -> list[int]:
    return [int(color[i:i + 2], 16) for i in (1, 3, 5)]


DECODED, MASKED, RESCUED = _hex("#4a6fa5"), _hex("#2a2a30"), _hex("#ffc400")
RESCUED_RUN = _hex("#8fb4e6")


def test_step_frame_shows_decoded_masked_and_rescued(tmp_path) -> None:
    step = events.step_payload(widget_record(False), "7")
    stats = {"strategy": "ladr", "steps": 14, "nfe": 14, "seconds": 3.25,
             "token_forwards": 10, "token_forwards_full": 40, "forwards_saved_pct": 75.0,
             "nfe_per_image": 14.0, "steps_planned": 128, "official_steps": 64,
             "official_nfe_per_image": 36.0}
    final = events.final_payload("7", stats, events.step_payload(widget_record(True), "7"))
    shot = tmp_path / "widget.png"
    step_r, final_r, empty_r = _render([step, final, None], tmp_path, shot)

    cells = step_r["cells"]
    for i in (0, 1, 2, 3, 4, 7):  # decoded, not rescued this step
        assert cells[i] == DECODED, i
    for i in (8, 9, 10, 11):  # still masked
        assert cells[i] == MASKED, i
    for i in (5, 6):  # rescued this step
        assert cells[i] == RESCUED, i
    texts = [o["text"] for o in step_r["ops"] if o["op"] == "text"]
    progress = round(100 * math.acos(4 / 12) * 2 / math.pi)  # cosine gamma^-1(masked share)
    assert f"step 5/64 · structure · masked 33.3% · NFE 5 · {progress}%" in texts
    assert any("2 rescued this step" in t for t in texts)

    final_texts = [o["text"] for o in final_r["ops"] if o["op"] == "text"]
    assert "done: 14 of 128 steps" in final_texts  # two lines: one would not fit
    assert "14 passes (official 36) · 3.25 s · cache saved 75%" in final_texts
    assert final_r["cells"][9] == DECODED  # nothing masked any more
    # the final frame shows where the run's rescue decoded tokens
    assert final_r["cells"][5] == final_r["cells"][6] == RESCUED_RUN
    assert "2 of 12 tokens decoded by rescue (light cells)" in final_texts
    assert any("waiting" in o.get("text", "") for o in empty_r["ops"])
    assert shot.stat().st_size > 1000


def test_large_grid_frame_stays_small(tmp_path) -> None:
    """A 64 x 64 grid (1024 px DiMOO) draws as row runs, not 4096 rects per layer."""
    n = 64 * 64
    masked = torch.zeros(1, n, dtype=torch.bool)
    masked[0, n // 2:] = True
    rec = {**widget_record(False), "masked": masked, "rescued": torch.zeros(1, n, dtype=torch.bool),
           "unmasked": torch.zeros(1, n, dtype=torch.bool), "tokens": torch.zeros(1, n).long(),
           "grid": (64, 64)}
    payload = events.step_payload(rec, "3")
    assert len(json.dumps(payload)) < 20_000
    (res,) = _render([payload], tmp_path)
    # background + the decoded grid + one masked run per row
    assert sum(o["op"] == "rect" for o in res["ops"]) == 2 + 32


def test_final_frame_counts_the_rescues_of_its_own_run_only(tmp_path) -> None:
    """Rescues accumulate over a run's events; a step-1 event starts a new run; a run without
    rescue (the baseline) ends on the plain counters."""
    stats = {"strategy": "ladr", "steps": 3, "nfe": 3, "seconds": 1.0}
    first = events.step_payload(widget_record(False), "7")  # step 5: tokens 5, 6 rescued
    rec = widget_record(False)
    rec["rescued"] = torch.zeros(1, 12, dtype=torch.bool)
    rec["rescued"][0, 0] = True
    later = events.step_payload(rec, "7")  # token 0 rescued
    new_run = events.step_payload({**widget_record(False), "step": 0,
                                   "rescued": torch.zeros(1, 12, dtype=torch.bool)}, "7")
    done_new = events.final_payload("7", stats, new_run)
    done_old = events.final_payload("7", stats, later)
    res = _render([first, later, done_old, new_run, done_new], tmp_path)
    old_cells, new_cells = res[2]["cells"], res[4]["cells"]
    assert [i for i, c in enumerate(old_cells) if c == RESCUED_RUN] == [0, 5, 6]
    assert RESCUED_RUN not in new_cells
    texts = [o["text"] for o in res[2]["ops"] if o["op"] == "text"]
    assert "3 of 12 tokens decoded by rescue (light cells)" in texts
    assert not any("decoded by rescue" in o.get("text", "") for o in res[4]["ops"])


ORDER = [_hex(c) for c in ("#223a5e", "#3b5f94", "#6f95cc", "#b6cff0")]


def test_final_frame_of_a_run_without_rescue_shows_its_decode_order(tmp_path) -> None:
    """The official sampler rescues nothing: its last frame shades every token by the quarter
    of the run in which it was decoded (it used to be one flat colour)."""
    decoded_by_step = [2, 5, 9, 12]  # tokens decoded after steps 1..4 (a 4-step run)
    payloads = []
    for step, count in enumerate(decoded_by_step):
        masked = torch.ones(1, 12, dtype=torch.bool)
        masked[0, :count] = False
        none = torch.zeros(1, 12, dtype=torch.bool)
        rec = {**widget_record(False), "step": step, "steps": 4, "strategy": "baseline",
               "masked": masked, "rescued": none, "unmasked": none, "phase": torch.tensor([-1])}
        payloads.append(events.step_payload(rec, "3"))
    stats = {"strategy": "baseline", "steps": 4, "nfe": 4, "seconds": 1.0}
    payloads.append(events.final_payload("3", stats, payloads[-1]))
    res = _render(payloads, tmp_path)
    cells = res[-1]["cells"]
    assert cells[:2] == [ORDER[0]] * 2  # step 1 of 4: first quarter, darkest
    assert cells[2:5] == [ORDER[1]] * 3
    assert cells[5:9] == [ORDER[2]] * 4
    assert cells[9:] == [ORDER[3]] * 3
    texts = [o["text"] for o in res[-1]["ops"] if o["op"] == "text"]
    assert "decode order, darker = earlier (steps 1-4)" in texts
    assert DECODED not in res[-1]["cells"]
    # mid-run frames are unchanged: decoded cells in the plain colour
    assert res[1]["cells"][:5] == [DECODED] * 5 and res[1]["cells"][5] == MASKED


def test_a_restored_run_draws_its_final_frame_and_says_when_it_ran(tmp_path) -> None:
    """The sampler's record of a finished run (its final event with the run's map,
    events.RunMap) drawn after a tab switch / reload / cached run: the same cells as the live
    final frame, a line saying when it ran ("cached: " for a run served from ComfyUI's cache),
    and counts in the singular where they are 1."""
    run_map = events.RunMap()
    first = events.step_payload(widget_record(False), "7")  # step 5: tokens 5, 6 rescued
    run_map.update(first)
    stats = {"strategy": "ladr", "steps": 1, "nfe": 1, "seconds": 1.0, "nfe_per_image": 1.0,
             "steps_planned": 256, "official_steps": 64,
             "official_nfe_per_image": 64.0}
    final = events.final_payload("7", stats, events.step_payload(widget_record(True), "7"),
                                 run_map)
    live, restored, cached = _render([first, final, {"restore": final},
                                      {"restore": final, "cached": True}], tmp_path)[1:]
    assert restored["cells"] == live["cells"] == cached["cells"]
    assert restored["cells"][5] == restored["cells"][6] == RESCUED_RUN
    texts = [[o["text"] for o in r["ops"] if o["op"] == "text"] for r in (live, restored, cached)]
    assert not any("from the run at" in t for t in texts[0])
    assert texts[1][0].startswith("from the run at ") and texts[2][0].startswith(
        "cached: from the run at "), texts
    assert texts[1][-2:] == ["done: 1 of 256 steps",
                             "1 pass (official 64) · 1.00 s"], texts[1]
    assert "2 of 12 tokens decoded by rescue (light cells)" in texts[1]
