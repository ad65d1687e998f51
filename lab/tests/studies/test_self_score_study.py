"""The self-score study's arithmetic (lab/studies/self_score_study.py, used by the self-score and
calibration benchmarks) on data where the answer is known: the margin fit, the block
aggregation and the error kinds."""

from __future__ import annotations

import numpy as np
import pytest

from lab.nano import scenes
from lab.studies import self_score_study as sv


def _evaluator(diffs: dict[str, float]) -> dict[str, dict]:
    return {s: {"overall": 0.8 + d, "diff": {"diff": d, "lo": d - 0.05, "hi": d + 0.05}}
            for s, d in diffs.items()}


def test_the_margin_is_the_fitted_lines_self_score_at_a_drop_of_005() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(-0.1, 0.2, 400)
    noise = rng.normal(0, 0.1, 400)
    noise -= noise.mean()
    drops = {"baseline-64": 0.0, "baseline-32": -0.15, "ladr-a": -0.2, "ladr-b": -0.3,
             "broken": -0.7}
    values = {s: base + 0.3 * d + (noise if s != "baseline-64" else 0) for s, d in drops.items()}
    values["ladr-b"] = base + 0.15 * -0.3 + noise  # the self-score sees half of ladr-b's loss
    f = sv.fit(values, _evaluator(drops))
    assert "broken" not in f["settings"]  # evaluator 0.1 < 0.35: left out of the fit
    ev = np.array([-0.15, -0.2, -0.3])
    ss = np.array([0.3 * -0.15, 0.3 * -0.2, 0.15 * -0.3])
    slope = (ss * ev).sum() / (ev * ev).sum()
    assert f["slope"] == pytest.approx(slope) and f["margin"] == pytest.approx(0.05 * slope)
    assert f["ratios"]["ladr-b"] == pytest.approx(0.15 * -0.3 / (slope * -0.3))
    assert f["worst_ratio"] == pytest.approx(f["ratios"]["ladr-b"])
    assert f["spread"] == pytest.approx(np.std(noise, ddof=1))
    judged = sv.judge(values, _evaluator(drops), f["margin"])
    assert set(judged["evaluator_drops"]) == {"baseline-32", "ladr-a", "ladr-b", "broken"}
    assert judged["missed_mean"] == []


def test_block_aggregation_takes_the_worst_re_masked_block() -> None:
    logp = np.full((1, 2, 4), np.nan, dtype=np.float32)
    logp[0, 0, :2] = [-0.1, -0.3]  # block 0 in pass 0: mean -0.2
    logp[0, 1, 2:] = [-1.0, -2.0]  # block 1 in pass 1: mean -1.5
    maps = {"p": {"guided": logp, "block": np.array([[0, 0, 1, 1]])}}
    assert sv.tail_score(maps, "p", "guided", None, 0.0)[0] == pytest.approx(-1.5)
    assert sv.mean_score(maps, "p", "guided", None)[0] == pytest.approx(-0.85)
    assert sv.mean_score(maps, "p", "guided", 1)[0] == pytest.approx(-0.2)


def _image(objects: tuple[scenes.Obj, ...]) -> np.ndarray:
    return scenes.render(objects)


@pytest.mark.parametrize("spec, objects, kind", [
    (scenes.Spec("counting", (("circle", None),) * 3),
     (scenes.Obj("circle", "red", 12, 12, 12), scenes.Obj("circle", "red", 36, 12, 12)),
     "count"),
    (scenes.Spec("colors", (("square", "blue"),)),
     (scenes.Obj("square", "red", 24, 24, 16),), "colour"),
    (scenes.Spec("single_object", (("triangle", None),)),
     (scenes.Obj("square", "red", 24, 24, 16),), "shape"),
    (scenes.Spec("position", (("circle", None), ("square", None)), "left of"),
     (scenes.Obj("circle", "red", 36, 24, 12), scenes.Obj("square", "blue", 12, 24, 12)),
     "relation")])
def test_error_kinds_read_from_the_evaluators_detections(spec, objects, kind) -> None:
    assert sv.error_kind(spec, _image(objects)) == kind


def test_a_merged_shape_is_malformed() -> None:
    spec = scenes.Spec("two_object", (("square", None), ("circle", None)))
    merged = (scenes.Obj("square", "red", 20, 24, 16), scenes.Obj("circle", "red", 30, 24, 16))
    assert sv.error_kind(spec, _image(merged)) == "malformed"
