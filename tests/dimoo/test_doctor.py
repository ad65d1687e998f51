"""python -m ladr_core.doctor FOLDER: the files and how each is read, the values in force, the
estimator's card table, every refusal with its fix; host-free, no code from the folder runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ladr_core.dimoo.weights.checkpoint import load_checkpoint
from ladr_core.doctor import CARD_TABLE_SOURCE, card_table, diagnose, main
from tests.kit.tiny_checkpoint import MARKER

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_names_files_values_and_the_card_table(dimoo_checkpoint: Path) -> None:
    report, refusals = diagnose(dimoo_checkpoint)
    ckpt = load_checkpoint(dimoo_checkpoint)
    assert refusals == []
    for rel in ("config.json", "model.safetensors.index.json", "tokenizer.json",
                "vqvae/config.json", "vqvae/diffusion_pytorch_model.safetensors",
                "modeling_evil.py"):
        line = next(ln for ln in report.splitlines() if ln.strip().startswith(rel + " "))
        assert "not read" not in line or rel.endswith(".py"), line
    assert "remote code: never imported" in report and not (dimoo_checkpoint / MARKER).exists()
    ids = ckpt.ids
    assert f"mask {ids.mask}, newline {ids.newline}" in report
    assert f"logits width {ckpt.config.n_embeddings}" in report
    assert f"theta {ckpt.config.rope_theta:g}" in report
    assert f"accepted {ckpt.config.max_sequence_length} tokens" in report  # nano-style ids
    assert f"VQ factor {ckpt.vq_factor}" in report
    table = card_table()
    readme = CARD_TABLE_SOURCE.read_text()
    assert len(table) >= 3 and all(line.strip() in readme for line in table)
    assert "\n".join(table) in report
    assert "Refused: nothing" in report
    # the weights' memory: the format's estimate, what this bf16 load holds
    held = sum(t.numel() * t.element_size() for t in ckpt.transformer.state_dict().values())
    assert f"in memory (bfloat16 compute): as stored (official) {held / 2**20:.1f} MiB; " \
        "fp8_e4m3fn " in report


def test_every_refusal_is_listed_with_its_fix(dimoo_checkpoint: Path, tmp_path: Path) -> None:
    folder = Path(shutil.copytree(dimoo_checkpoint, tmp_path / "broken"))
    (folder / "model-00002-of-00002.safetensors").unlink()
    vq = folder / "vqvae" / "diffusion_pytorch_model.safetensors"
    vq.rename(vq.with_suffix(".bin"))
    (folder / "tokenizer.json").unlink()
    cache = folder / ".cache" / "huggingface" / "download"
    cache.mkdir(parents=True)
    (cache / "model-00002-of-00002.safetensors.abc123.incomplete").write_bytes(b"\0")
    report, refusals = diagnose(folder)
    assert "left 1 unfinished file(s)" in report and "download again" in report
    assert len(refusals) == 3, refusals
    assert any("model-00002-of-00002.safetensors is listed" in r for r in refusals)
    assert any("diffusion_pytorch_model.bin" in r and "save_file(torch.load(" in r
               for r in refusals)
    assert any("tokenizer.json is missing" in r for r in refusals)
    assert all(f"  {i}. {r}" in report for i, r in enumerate(refusals, 1))


def test_not_a_checkpoint_and_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": "Pipeline"}))
    report, refusals = diagnose(tmp_path)
    assert len(refusals) == 1 and "config.json is missing" in refusals[0]
    assert main([str(tmp_path)]) == 1 and main([]) == 2
    run = subprocess.run([sys.executable, "-c", "import sys, ladr_core.doctor as d; "
                          "rc = d.main([sys.argv[1]]); "
                          "assert not any(m.split('.')[0] == 'comfy' for m in sys.modules); "
                          "sys.exit(rc)", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 1 and "Refused (1)" in run.stdout, run.stderr
