"""A calibration's weights label, in its report and its resume key, names the compute dtype and
how the weights are stored: a GGUF file is labelled GGUF (its bytes are uint8, not a dtype),
and the same file computed in two dtypes gives two resume keys (a partial state made in one is
never resumed in the other)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ladr_core
from ladr_core.calibrate import api
from ladr_core.calibrate.runner import CalibrationConfig
from ladr_core.dimoo import load_dimoo
from ladr_core.dimoo.weights import gguf_write


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gguf_write.write_gguf(ladr_core.nano_model_path(),
                                 tmp_path_factory.mktemp("g") / "nano-Q8_0.gguf", "Q8_0")


def test_a_gguf_label_names_gguf_and_two_compute_dtypes_give_two_keys(gguf: Path) -> None:
    config = CalibrationConfig(("a red circle", "a blue square"), steps=4, size=48, batch=1)
    labels = {}
    for dtype in ("fp32", "bf16"):
        pipe = load_dimoo(gguf, dtype=dtype)
        labels[dtype] = api._weights_desc(pipe, None)
    assert "GGUF Q8_0" in labels["fp32"] and "uint8" not in labels["fp32"]
    assert "computed in float32" in labels["fp32"] and "computed in bfloat16" in labels["bf16"]
    keys = [config.key("fingerprint", label) for label in labels.values()]
    assert keys[0] != keys[1]


def test_a_float_checkpoints_label_names_its_dtype_and_the_pack_fp8_its_storage() -> None:
    nano = ladr_core.nano_model_path()
    plain = api._weights_desc(load_dimoo(nano, dtype="fp32"), None)
    assert plain == "computed in float32; stored float32; weight_dtype default"
    fp8 = api._weights_desc(load_dimoo(nano, dtype="fp32", weight_dtype="fp8_e4m3fn"),
                            "fp8_e4m3fn")
    assert "float8_e4m3fn" in fp8 and "computed in float32" in fp8
    assert fp8.endswith("weight_dtype fp8_e4m3fn")
