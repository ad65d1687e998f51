"""VQ decode (official lookup path) and the codebook -> RGB preview table."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from ladr_core.dimoo import DiMOOPipeline, load_dimoo
from ladr_core.dimoo.model.vq import MASK_GREY, build_preview_table


class CountingDecoder(nn.Module):
    """Wraps the VQ decoder module and counts its forward calls."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.calls = 0

    def forward(self, *args: object, **kwargs: object) -> torch.Tensor:
        self.calls += 1
        return self.inner(*args, **kwargs)


@pytest.fixture
def pipe(dimoo_checkpoint: Path) -> DiMOOPipeline:
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    pipe.vq.decoder = CountingDecoder(pipe.vq.decoder)
    return pipe


def test_decode_matches_official_decode_path(pipe: DiMOOPipeline) -> None:
    codes = torch.randint(0, 32, (2, 3 * 5), generator=torch.Generator().manual_seed(0))
    images = pipe.decode(codes, (3, 5))
    assert images.shape == (2, 12, 20, 3) and images.dtype == torch.float32
    assert images.min() >= 0 and images.max() <= 1
    vq = pipe.vq
    with torch.no_grad():  # official decode_vq_to_image: lookup, decode, clip(0, 1)
        ref = vq.decode(codes.view(2, 3, 5), force_not_quantize=True,
                        shape=(2, 3, 5, vq.config.latent_channels)).sample.clip(0, 1)
    torch.testing.assert_close(images, ref.permute(0, 2, 3, 1))
    assert (images[0] - images[1]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="subtract the image token offset"):
        pipe.decode(codes + 32, (3, 5))
    with pytest.raises(ValueError, match="grid"):
        pipe.decode(codes, (4, 4))


def test_a_batch_is_decoded_one_image_at_a_time(pipe: DiMOOPipeline) -> None:
    """The decoder's float32 activations are one image's whatever the batch (before,
    the node, runs.py and the calibration decoded whole batches beside the resident
    transformer); image i equals its own decode exactly, and the whole batch at once within
    float rounding."""
    from ladr_core.dimoo.model.vq import decode_codes

    codes = torch.randint(0, 32, (4, 3 * 5), generator=torch.Generator().manual_seed(2))
    batch = pipe.decode(codes, (3, 5))
    assert pipe.vq.decoder.calls == 4
    singles = torch.cat([pipe.decode(codes[i:i + 1], (3, 5)) for i in range(4)])
    assert torch.equal(batch, singles)
    whole = decode_codes(pipe.vq, codes, (3, 5), chunk=4)
    assert pipe.vq.decoder.calls == 4 + 4 + 1
    torch.testing.assert_close(whole, batch, atol=1e-5, rtol=0)
    pairs = decode_codes(pipe.vq, codes, (3, 5), chunk=3)  # a last chunk of one
    torch.testing.assert_close(pairs, batch, atol=1e-5, rtol=0)
    assert decode_codes(pipe.vq, codes[:0], (3, 5)).shape == (0, 12, 20, 3)


def test_preview_table_built_once_and_preview_never_calls_decoder(pipe: DiMOOPipeline) -> None:
    decoder = pipe.vq.decoder
    table = pipe.preview_table()
    assert table.shape == (32, 4, 4, 3) and table.min() >= 0 and table.max() <= 1
    built = decoder.calls
    assert built == 1  # 32 codes in one chunk
    tokens = torch.randint(0, 32, (3, 6 * 7))
    masked = torch.zeros(3, 42, dtype=torch.bool)
    masked[:, ::5] = True
    for _ in range(5):
        preview = pipe.preview(tokens, masked, (6, 7))
    assert decoder.calls == built  # gather + reshape only
    assert preview.shape == (3, 24, 28, 3)
    # token (r, c) of item b occupies the p x p block at (r*p, c*p)
    b, r, c = 1, 2, 3
    block = preview[b, r * 4:(r + 1) * 4, c * 4:(c + 1) * 4]
    if masked[b, r * 7 + c]:
        assert (block == MASK_GREY).all()
    else:
        torch.testing.assert_close(block, table[tokens[b, r * 7 + c]])
    assert (preview[0, 0:4, 0:4] == MASK_GREY).all()  # slot 0 is masked


def test_table_rows_are_decoded_uniform_patches(pipe: DiMOOPipeline) -> None:
    table = build_preview_table(pipe.vq, pipe.vq_factor, size=2, context=3, chunk=8)
    assert table.shape == (32, 2, 2, 3)
    code = 7
    uniform = pipe.decode(torch.full((1, 9), code), (3, 3))[0, 4:8, 4:8]  # centre token
    pooled = uniform.permute(2, 0, 1)[None]
    expected = torch.nn.functional.adaptive_avg_pool2d(pooled, 2)[0].permute(1, 2, 0)
    torch.testing.assert_close(table[code], expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="context"):
        build_preview_table(pipe.vq, pipe.vq_factor, context=2)


def test_the_shipped_table_moves_with_the_vq_and_stays_out_of_its_state_dict() -> None:
    """The nano checkpoint's fitted table is a buffer of the VQ: a host moving the VQ (here a
    dtype change, as a device change would) moves the table with it (before, it
    stayed on the offload device while the VQ went to the GPU)."""
    from ladr_core import nano_model_path
    from ladr_core.dimoo.images import PREVIEW_BUFFER

    nano = load_dimoo(nano_model_path(), dtype=torch.float32)
    table = nano.preview_table()
    assert table.dtype == torch.float32 and getattr(nano.vq, PREVIEW_BUFFER) is table
    assert PREVIEW_BUFFER not in nano.vq.state_dict()  # not a weight: never saved or counted
    nano.vq.to(torch.float64)
    moved = nano.preview_table()
    assert moved.dtype == torch.float64
    torch.testing.assert_close(moved.float(), table)


def test_the_preview_gathers_on_the_tokens_device(pipe: DiMOOPipeline) -> None:
    """Tokens on another device than the VQ (meta here, a GPU in ComfyUI after a partial
    load): the table goes to the tokens once and is kept, the tokens never go to the table,
    and the preview is on the tokens' device (events.step_update concatenates it with the
    masks there)."""
    meta = torch.device("meta")
    tokens = torch.randint(0, 32, (2, 12)).to(meta)
    masked = torch.zeros(2, 12, dtype=torch.bool).to(meta)
    preview = pipe.preview(tokens, masked, (3, 4))
    assert preview.device == meta and preview.shape == (2, 12, 16, 3)
    copy = pipe.preview_table(meta)
    assert copy.device == meta and pipe.preview_table(meta) is copy  # made once, kept
    assert pipe.preview_table().device == torch.device("cpu")  # the VQ's own stays put
    pipe.vq.to(meta)  # the VQ follows: its own table is now the one used
    assert pipe.preview_table(meta) is pipe.vq.ladr_preview_table
