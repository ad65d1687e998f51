"""Image-token offset: without an image_token_offset key it is the logits width minus the
codebook (the official generators' rule); a key given must agree with the width, else the
loader refuses."""

from __future__ import annotations

import json

import pytest

from ladr_core.dimoo import CheckpointError, ConfigError, DiMOOIds, load_checkpoint
from tests.kit.tiny_checkpoint import write_tiny_checkpoint

OFFICIAL_WIDTH = 126356 + 8192  # official image utilities' offset + the 8192-code VQ


def test_official_ids_agree_with_a_134548_wide_head_only() -> None:
    ids = DiMOOIds.from_config_dict({})  # no width given: the DiMOO defaults
    ids.validate_against(OFFICIAL_WIDTH)
    with pytest.raises(ConfigError, match="read image codes at offset 126464 .* use 126356"):
        ids.validate_against(126464 + 8192)  # e.g. a head padded to a multiple of 128


@pytest.mark.parametrize("width", [OFFICIAL_WIDTH, 126464 + 8192])
def test_without_an_offset_key_the_offset_is_the_width_minus_the_codebook(width) -> None:
    """The real config.json has no id keys: the text vocabulary is the logits width minus
    8192, as the official generators derive it (``vocab_total - codebook_size``)."""
    ids = DiMOOIds.from_config_dict({}, width=width)
    assert ids.image_offset == width - ids.codebook_size
    ids.validate_against(width)


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda c: c.update(embedding_size=c["vocab_size"] + 8), r"logits are \d+ wide"),
    (lambda c: c.update(image_token_offset=c["image_token_offset"] - 1), r"contradict"),
    (lambda c: c.update(codebook_size=c["codebook_size"] - 2), r"codebook_size"),
])
def test_loader_refuses_contradicting_offset_keys(tmp_path, edit, needle) -> None:
    folder = write_tiny_checkpoint(tmp_path / "ckpt")
    load_checkpoint(folder)  # consistent as written
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=needle) as err:
        load_checkpoint(folder)
    assert "config.json" in str(err.value)
