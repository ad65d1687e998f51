"""lab/benchmarks/roofline: the kernels the emulated card records, their price, the committed
results file against its own kernel tables and the H100 measurement, the documents against
the file, and a committed gpu_check run taking a card's README cell."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lab.benchmarks.card_fit.table import load as load_fit
from lab.benchmarks.common import REPO_ROOT, RESULTS_DIR
from lab.benchmarks.roofline import check as h100
from lab.benchmarks.roofline import main as roofline
from lab.benchmarks.roofline.cost import seconds, table
from lab.benchmarks.roofline.ops import Kernel, recording
from lab.benchmarks.roofline.table import README_LABELS, cell, load, readme_row
from tests.kit.cuda_emu import CARDS, emulated_cuda

ROOF = load()
LAUNCH_FILE = RESULTS_DIR / "h100" / "sampler_overhead_ab_new2_9994e80.json"


def test_a_kernel_costs_the_larger_of_its_two_bounds_plus_a_launch() -> None:
    h = CARDS["h100"]
    heavy = Kernel("aten.mm", "bfloat16", int(h.peak("bfloat16")), 1)  # one second of FLOPs
    wide = Kernel("aten.add", "bfloat16", 0, int(h.bandwidth) // 2)  # half a second of bytes
    got = seconds(table([heavy, wide, wide]), h)
    assert math.isclose(got["compute_s"], 1.0) and math.isclose(got["memory_s"], 1.0, rel_tol=1e-9)
    assert math.isclose(got["bound_s"], 2.0, rel_tol=1e-9)
    assert got["kernels"] == 3 and math.isclose(got["seconds"], 2.0 + 3 * h.launch_s)
    fp8 = seconds(table([Kernel("aten._scaled_mm", "float8", heavy.flops, 1)]), h)
    assert math.isclose(fp8["compute_s"], h.peak("bfloat16") / h.peak("float8"))


def test_the_recorder_sees_each_kernel_once_with_its_flops_and_bytes() -> None:
    with emulated_cuda(card="h100"):
        a = torch.randn(64, 128, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(128, 32, dtype=torch.bfloat16, device="cuda")
        with recording() as kernels:
            (a @ b).t()  # the transpose is a view: no kernel
    assert kernels == [Kernel("aten.mm", "bfloat16", 2 * 64 * 128 * 32,
                              2 * (64 * 128 + 128 * 32 + 64 * 32))]


@pytest.mark.parametrize(("name", "dtype", "head", "backend"),
                         [("h100", torch.bfloat16, 8, "flash"),
                          ("rtx2080", torch.float32, 6, "math")])  # no flash; 6 % 4: no efficient
def test_attention_is_one_kernel_of_the_cards_backend(name: str, dtype: torch.dtype, head: int,
                                                      backend: str) -> None:
    q = torch.randn(1, 2, 16, head, dtype=dtype)
    with emulated_cuda(card=name):
        qd = q.to("cuda")
        with recording() as kernels:
            F.scaled_dot_product_attention(qd, qd, qd)
    mine = [k for k in kernels if k.op.startswith("attention:")]
    assert [k.op for k in mine] == [f"attention:{backend}"]
    assert mine[0].flops == 2 * 2 * (2 * 16 * 16 * head)  # q k^T and p v, two heads
    rows = 2 * 16
    fused = 4 * q.numel() * q.element_size() + rows * 4  # q, k, v, out; float32 log-sum-exp
    assert mine[0].nbytes == fused + (4 * rows * 16 * 4 if backend == "math" else 0)


def test_the_launch_cost_is_the_committed_launch_bound_figure() -> None:
    row = next(r for r in json.loads(LAUNCH_FILE.read_text())["rows"]
               if r["case"] == "baseline@T=1")
    for c in CARDS.values():
        assert math.isclose(c.launch_s, row["per_step_ms"] / 1e3 / row["kernels_per_step"])


def test_the_h100_profile_is_the_board_of_the_measurement() -> None:
    measured = json.loads(h100.MEASURED.read_text())["env"]["gpu"]
    assert CARDS["h100"].label.removesuffix(" (emulated)") == measured == "NVIDIA H100 80GB HBM3"


@pytest.mark.committed_result("lab/results/roofline.json")
def test_the_committed_seconds_follow_from_its_kernel_tables() -> None:
    assert ROOF is not None, "lab/results/roofline.json is missing: python -m lab.benchmarks.roofline"
    priced = 0
    for key, case in ROOF["cases"].items():
        name, layout, px = key.split("/")
        if "step" not in case:
            assert case["fits"] is False
            continue
        tables = ROOF["traces"][ROOF["trace_of"][f"{name}/{layout}"]][layout][px]
        assert case["step"] == pytest.approx(seconds(tables["call"], CARDS[name]))
        first = seconds(tables["first"], CARDS[name])["seconds"]
        for label, s in ROOF["strategies"].items():
            want = first + (s["nfe_mean"] - 1) * case["step"]["seconds"]
            assert case["per_image_s"][label] == pytest.approx(want)
        priced += 1
    assert priced and ROOF["cards"]["h100"]["peaks"] == dict(CARDS["h100"].peaks)


@pytest.mark.committed_result("lab/results/roofline.json")
def test_the_h100_ratios_are_the_estimate_over_the_measurement() -> None:
    assert ROOF is not None
    run = json.loads(h100.MEASURED.read_text())
    rows = {r["figure"]: r for r in ROOF["check"]["rows"]}
    call = rows["one full call, 1024 px, CFG rows packed (eager)"]
    assert call["measured_s"] == run["step"]["packed_ms"] / 1e3
    assert call["ratio"] == pytest.approx(call["estimated_s"] / call["measured_s"])
    assert ROOF["check"]["real_tokens"] == run["step"]["real_tokens"]
    assert ROOF["check"]["commit"] == "c522164"


@pytest.mark.committed_result("lab/results/roofline.json")
def test_readme_carries_the_roofline_row_of_the_results_file() -> None:
    assert ROOF is not None
    readme = (REPO_ROOT / "README.md").read_text()
    fit = load_fit()
    assert fit is not None
    shown = json.loads((RESULTS_DIR / "gpu_estimate.json").read_text())["cards_gb"]
    cards = [c for c, v in fit["cards"].items() if v["gb"] in shown]  # README's columns
    assert readme_row(ROOF, cards) in readme.splitlines()
    best = cell(ROOF, "rtx4090")
    assert "s (" in best and best.split(" s (")[0].count(" / ") == len(README_LABELS) - 1


def _gpu_check(folder: Path, name: str, smoke: bool, seconds_each: tuple[float, float]) -> None:
    rows = [{"case": label, "seconds_per_image": s, "how": "measured"}
            for label, s in zip(README_LABELS, seconds_each, strict=True)]
    doc = {"device_name": name, "smoke": smoke, "env": {"utc": "2026-12-01T00:00:00Z"},
           "sections": {"c": {"per_image": rows}}}
    (folder / f"gpu_check_{'smoke' if smoke else 'run'}.json").write_text(json.dumps(doc))


@pytest.mark.committed_result("lab/results/roofline.json")
def test_a_committed_gpu_check_run_takes_its_cards_cell(tmp_path: Path) -> None:
    assert ROOF is not None
    label = ROOF["cards"]["rtx4090"]["label"]
    estimated = cell(ROOF, "rtx4090", tmp_path)
    _gpu_check(tmp_path, label, True, (1.0, 2.0))  # a smoke run replaces nothing
    assert cell(ROOF, "rtx4090", tmp_path) == estimated
    _gpu_check(tmp_path, label, False, (30.25, 8.5))
    assert cell(ROOF, "rtx4090", tmp_path) == "30.2 / 8.5 s (bf16, measured: gpu_check)"
    assert cell(ROOF, "rtx4080", tmp_path) == cell(ROOF, "rtx4080")  # another card keeps its


def test_an_unknown_card_is_refused_naming_the_choices(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        roofline.main(["--cards", "gtx1080"])
    err = capsys.readouterr().err
    assert "--cards: gtx1080 is not one of" in err and "rtx2080" in err
