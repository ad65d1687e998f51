"""Files of a calibration: atomic JSON writes, the resumable partial state, the checkpoint
fingerprint, and ``ladr_calibration.json`` beside the checkpoint (written and read back).

Every file goes to a temporary name in its folder and is renamed over the target
(``os.replace``). The partial state ``<OUT>.partial.json`` carries the key of everything that
decides its numbers (fingerprint, prompts, seeds, size, T, dtype, self-score) and is reused
only when the key matches; OUT and the checkpoint's file are written when the calibration
completes, and the partial state is then removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["CALIBRATION_FILE", "FORMAT", "CalibrationError", "fingerprint", "load_calibration",
           "load_partial", "partial_path", "write_json_atomic"]

CALIBRATION_FILE = "ladr_calibration.json"
FORMAT = "ladr-calibration/1"
_SAMPLES = 16  # byte samples per weight file (plus its header)
_SAMPLE_BYTES = 1 << 16


class CalibrationError(ValueError):
    """A calibration input or file is wrong; the message names it and the fix."""


class CalibrationInputError(CalibrationError, InputError):
    """One calibration argument is wrong: ``name`` (the Python argument: ``budget_minutes``,
    ``size``), ``problem``, ``fix``. The command line names its flag (``--budget-minutes``),
    the LADR Calibrate node its widget."""


def _read_umask() -> int:
    """The process umask (read once, at import: os.umask can only be read by setting it)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _read_umask()


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON to a temporary file in ``path``'s folder, then renamed over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    done = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes it 0600; a report is the user's file
        os.replace(tmp, path)
        done = True
    finally:  # whatever stopped it (an interrupt included), no temporary file is left
        if not done:
            Path(tmp).unlink(missing_ok=True)


def partial_path(out: Path) -> Path:
    """Where the partial state of a calibration writing ``out`` lives."""
    out = Path(out)
    return out.with_name(out.name + ".partial.json")


def load_partial(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The stored partial state when it is intact and made with ``key``, else None (a damaged
    or foreign file is not trusted; it is overwritten by the next save)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("runs"),
                                                                              dict):
        return None
    return data


def _weight_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and (
        p.suffix == ".safetensors" or p.name in ("config.json", "model.safetensors.index.json")))


def _file_digest(h: Any, path: Path) -> None:
    """Name, size, the safetensors header (names, dtypes, shapes) and evenly spaced samples."""
    size = path.stat().st_size
    h.update(f"{path.name}\0{size}\0".encode())
    with path.open("rb") as f:
        if path.suffix != ".safetensors" or size < 8:
            h.update(f.read())
            return
        header = int.from_bytes(f.read(8), "little")
        h.update(f.read(min(header, size - 8)))
        for i in range(_SAMPLES):
            f.seek(max(0, (size - _SAMPLE_BYTES) * i // max(1, _SAMPLES - 1)))
            h.update(f.read(_SAMPLE_BYTES))


def fingerprint(folder: str | Path) -> str:
    """A checkpoint's identity: sha256 over config.json, the weight index and every top-level
    ``*.safetensors`` (name, size, header, 16 x 64 KiB samples: about 1 MiB read per file; a
    fine-tune of the same shapes differs there). CalibrationError without weights."""
    root = Path(folder)
    if not root.is_dir():
        raise CalibrationError(f"{root}: not a folder; give the checkpoint folder (config.json, "
                               "*.safetensors, tokenizer files, vqvae/)")
    files = _weight_files(root)
    if not any(p.suffix == ".safetensors" for p in files):
        raise CalibrationError(f"{root}: no *.safetensors weights in this folder; point at the "
                               "Lumina-DiMOO checkpoint folder that holds them")
    h = hashlib.sha256()
    for p in files:
        _file_digest(h, p)
    return h.hexdigest()


def load_calibration(path: str | Path, expected_fingerprint: str | None = None
                     ) -> dict[str, Any]:
    """Read and check a calibration file (``calibrate`` writes it); CalibrationError naming the
    file and the field when it is missing, damaged, of another format, or (with
    ``expected_fingerprint``) made for another checkpoint."""
    p = Path(path)
    fix = "run `python -m ladr_core.calibrate <checkpoint folder>` (or the LADR Calibrate node)"
    if not p.is_file():
        raise CalibrationError(f"{p}: no calibration file; {fix}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CalibrationError(f"{p}: damaged calibration file ({exc}); delete it and {fix}") \
            from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise CalibrationError(f"{p}: field 'format' is {got!r}, expected {FORMAT!r}; delete "
                               f"it and {fix}")
    names = _check_candidates(p, data, fix)
    if data.get("recommended") not in names:
        raise CalibrationError(f"{p}: field 'recommended' ({data.get('recommended')!r}) names "
                               f"no candidate; delete it and {fix}")
    got = (data.get("checkpoint") or {}).get("fingerprint") if isinstance(
        data.get("checkpoint"), dict) else None
    if expected_fingerprint is not None and got != expected_fingerprint:
        raise CalibrationError(f"{p}: field 'checkpoint.fingerprint' belongs to another "
                               f"checkpoint (or these weights changed since it was made); {fix} "
                               "for the weights you load now")
    return data


def _check_candidates(p: Path, data: dict[str, Any], fix: str) -> list[str]:
    cands = data.get("candidates")
    if not isinstance(cands, list) or not cands:
        raise CalibrationError(f"{p}: field 'candidates' must be a non-empty list; delete it and "
                               f"{fix}")
    for i, c in enumerate(cands):
        ok = isinstance(c, dict) and isinstance(c.get("name"), str) and all(
            isinstance(c.get(k), (int, float)) and not isinstance(c.get(k), bool)
            for k in ("nfe", "self_score"))
        if not ok:
            raise CalibrationError(f"{p}: field 'candidates[{i}]' needs a name, nfe and "
                                   f"self_score; delete it and {fix}")
    return [c["name"] for c in cands]
