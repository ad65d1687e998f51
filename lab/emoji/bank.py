"""The picture bank: every vocabulary emoji in every style, cut from the pinned packages.

Each picture is cropped to its drawn pixels (alpha > 0), centred on a square and resized to
`FULL` px (kept for the judge's augmentation) and to `SPRITE` px (what scenes paste). The bank is
written to a temporary folder and renamed into place only when complete, with a manifest that
records the package versions, the tarballs' and the bank's SHA-256 and the vocabulary; a bank
whose manifest or checksum does not match is refused, so a half-built one is never used.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from lab.emoji.packages import BY_STYLE, PACKAGES, EmojiDataError, Reader, cache_dir
from lab.emoji.vocab import VOCAB

FULL, SPRITE = 64, 16
BANK_VERSION = 1
BUILD_COMMAND = "python -m lab.emoji.build bank --force"
STYLES = tuple(p.style for p in PACKAGES)
DATASOURCE_SET = {"noto": "google", "twemoji": "twitter"}


@dataclass(frozen=True)
class Bank:
    styles: tuple[str, ...]
    full: np.ndarray      # uint8 [S, E, FULL, FULL, 4] RGBA
    sprites: np.ndarray   # uint8 [S, E, SPRITE, SPRITE, 4] RGBA

    def style_index(self, style: str) -> int:
        if style not in self.styles:
            raise ValueError(f"style {style!r} is not one of {self.styles}")
        return self.styles.index(style)


def bank_dir() -> Path:
    return cache_dir() / f"bank-v{BANK_VERSION}"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def normalise(rgba: Image.Image, size: int) -> np.ndarray:
    """Crop to the drawn pixels, centre on a transparent square, resize to `size` (uint8 RGBA)."""
    box = rgba.getchannel("A").point(lambda a: 255 if a > 0 else 0).getbbox()
    if box is None:
        raise ValueError("the picture is fully transparent")
    crop = rgba.crop(box)
    side = max(crop.size)
    square = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    square.paste(crop, ((side - crop.size[0]) // 2, (side - crop.size[1]) // 2))
    return np.asarray(square.resize((size, size), Image.LANCZOS))


def _decode(data: bytes, member: str, reader: Reader) -> Image.Image:
    """PNG bytes, or SVG bytes rasterised at 4 x FULL px (cairosvg), as an RGBA image."""
    try:
        if member.endswith(".svg"):
            import cairosvg

            data = cairosvg.svg2png(bytestring=data, output_width=4 * FULL, output_height=4 * FULL)
        img = Image.open(io.BytesIO(data))
        img.load()
        return img.convert("RGBA")
    except ImportError as exc:
        raise EmojiDataError("cairosvg is needed to draw OpenMoji's SVG pictures: run "
                             "`python -m pip install cairosvg==2.9.1` (it needs the system "
                             "library: apt-get install -y libcairo2)") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise EmojiDataError(f"picture {member} in {reader.path} is corrupt ({exc}): run "
                             f"`python -m lab.emoji.build install --force`") from exc


def _members(style: str, reader: Reader) -> dict[str, str]:
    """Vocabulary code -> member path of its picture, and a check of the names."""
    if style == "openmoji":
        rows = reader.text("data/openmoji.csv").splitlines()
        names = {r.split(",")[1]: r.split(",")[4] for r in rows[1:] if r.count(",") > 4}
        for e in VOCAB:
            if names.get(e.openmoji_code) != e.name:
                raise EmojiDataError(f"openmoji {reader.pkg.version} names {e.openmoji_code} "
                                     f"{names.get(e.openmoji_code)!r}, not {e.name!r}: the "
                                     f"vocabulary (lab/emoji/vocab.py) and the pin disagree")
        return {e.code: f"color/svg/{e.openmoji_code}.svg" for e in VOCAB}
    entries = {d["unified"]: d for d in json.loads(reader.text("emoji.json"))}
    out = {}
    for e in VOCAB:
        d = entries.get(e.code)
        if d is None or not d.get(f"has_img_{DATASOURCE_SET[style]}"):
            raise EmojiDataError(f"{reader.pkg.name} {reader.pkg.version} has no picture for "
                                 f"{e.code} ({e.name}): the vocabulary and the pin disagree")
        out[e.code] = f"img/{DATASOURCE_SET[style]}/64/{d['image']}"
    return out


def _style_arrays(style: str) -> tuple[np.ndarray, np.ndarray, str]:
    with Reader(BY_STYLE[style]) as reader:
        members = _members(style, reader)
        full, small = [], []
        for e in VOCAB:
            img = _decode(reader.read(members[e.code]), members[e.code], reader)
            full.append(normalise(img, FULL))
            small.append(normalise(img, SPRITE))
        return np.stack(full), np.stack(small), sha256(reader.path)


def build_bank(force: bool = False) -> Path:
    """Build the bank into a temporary folder and rename it into place when complete."""
    final = bank_dir()
    if final.is_dir() and not force:
        load_bank()
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=final.parent))
    try:
        arrays = [_style_arrays(s) for s in STYLES]
        np.savez_compressed(tmp / "bank.npz", full=np.stack([a[0] for a in arrays]),
                            sprites=np.stack([a[1] for a in arrays]))
        manifest = {"bank_version": BANK_VERSION, "styles": list(STYLES), "full": FULL,
                    "sprite": SPRITE, "vocab": [[e.code, e.name] for e in VOCAB],
                    "packages": [{"name": p.name, "version": p.version, "style": p.style,
                                  "artwork_license": p.artwork_license, "tarball_sha256": a[2]}
                                 for p, a in zip(PACKAGES, arrays, strict=True)],
                    "files": {"bank.npz": sha256(tmp / "bank.npz")}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"bank built -> {final}", flush=True)
    return final


def _refuse(why: str) -> EmojiDataError:
    return EmojiDataError(f"the emoji bank in {bank_dir()} {why}: run `{BUILD_COMMAND}`")


def load_bank() -> Bank:
    """The complete, checksum-verified bank of the current vocabulary, else one clear error."""
    folder = bank_dir()
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        raise _refuse("is missing or incomplete (no readable manifest.json)") from None
    if manifest.get("vocab") != [[e.code, e.name] for e in VOCAB]:
        raise _refuse("was built for another vocabulary")
    for name, digest in manifest["files"].items():
        if not (folder / name).is_file() or sha256(folder / name) != digest:
            raise _refuse(f"has a missing or changed {name} (checksum mismatch)")
    with np.load(folder / "bank.npz") as z:
        return Bank(tuple(manifest["styles"]), z["full"], z["sprites"])

