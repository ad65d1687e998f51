"""Small stand-ins for the three npm tarballs: every vocabulary emoji as a disc of its own
colour (PNG for the emoji-datasource sets, SVG for OpenMoji), written where packages.py looks."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from PIL import Image, ImageDraw

from lab.emoji.packages import PACKAGES, Package, tarball_path
from lab.emoji.vocab import VOCAB


def colour(i: int) -> tuple[int, int, int]:
    return (40 + (i * 67) % 200, 40 + (i * 131) % 200, 40 + (i * 29) % 200)


def _png(i: int) -> bytes:
    img = Image.new("RGBA", (64, 64), (0, 0, 0, 0))
    ImageDraw.Draw(img).ellipse((8, 8, 56, 56), fill=(*colour(i), 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _svg(i: int) -> bytes:
    r, g, b = colour(i)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 72 72"><circle cx="36" '
            f'cy="36" r="24" fill="rgb({r},{g},{b})"/></svg>').encode()


def _members(pkg: Package, version: str) -> dict[str, bytes]:
    files = {"package.json": json.dumps({"name": pkg.name, "version": version}).encode()}
    if pkg.style == "openmoji":
        rows = ["emoji,hexcode,group,subgroups,annotation,tags"]
        rows += [f"x,{e.openmoji_code},g,s,{e.name},t" for e in VOCAB]
        files["data/openmoji.csv"] = "\n".join(rows).encode()
        files.update({f"color/svg/{e.openmoji_code}.svg": _svg(i) for i, e in enumerate(VOCAB)})
        return files
    sub = "google" if pkg.style == "noto" else "twitter"
    entries = [{"unified": e.code, "image": e.code.lower() + ".png", f"has_img_{sub}": True}
               for e in VOCAB]
    files["emoji.json"] = json.dumps(entries).encode()
    files.update({f"img/{sub}/64/{e.code.lower()}.png": _png(i) for i, e in enumerate(VOCAB)})
    return files


def write_tarball(pkg: Package, version: str | None = None,
                  replace: dict[str, bytes] | None = None) -> Path:
    path = tarball_path(pkg)
    path.parent.mkdir(parents=True, exist_ok=True)
    files = {**_members(pkg, version or pkg.version), **(replace or {})}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def write_all() -> None:
    for pkg in PACKAGES:
        write_tarball(pkg)
