"""The calibration loop: every candidate on the same (prompt, seed) items, self-scored, resumable.

Order: the reference, then each candidate followed at once by the official sampler at its
measured NFE (unless that T has run), so a budget that runs out leaves every finished candidate
with its matched comparison. Items are the prompts, each ``seeds`` times (item k: seed
``seed + k``, for its image and its self-score), ``batch`` items per ``generate`` call. The
partial state is saved atomically after every chunk (state.py) and reused by a restart with
the same key. ``check`` runs at every sampler step and between chunks; what it raises
propagates untouched.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..devices import synchronize
from ..dimoo.tasks.selfscore import KINDS, SelfScoreConfig
from .candidates import Candidate, default_candidates, matched_baseline
from .sheet import sheet_items
from .state import CalibrationError, CalibrationInputError, load_partial, write_json_atomic

__all__ = ["CALIBRATION_SELF_SCORE", "CalibrationConfig", "Calibration", "LADR_NFE_GUESS"]

CALIBRATION_SELF_SCORE = SelfScoreConfig(passes=4, block=2, fraction=0.25, kind="guided")
"""The self-score a calibration reports: every token re-masked once (4 passes of a quarter of
the 2 x 2 blocks). Chosen on nano's validation set (docs/reports/SELF_SCORE.md): the 2 passes
it replaces score half the tokens and need about 1.6x the prompts for the same margin."""
LADR_NFE_GUESS = 1 / 3
"""Share of T a LADR candidate is assumed to need before it has run (budget planning only)."""
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class CalibrationConfig:
    """What to calibrate on (size and guidance None: the checkpoint's; budget in seconds)."""

    prompts: tuple[str, ...]
    seeds: int = 1
    size: int | None = None
    steps: int = 64
    cfg: float | None = None
    batch: int = 8
    budget_s: float | None = None
    self_score: SelfScoreConfig = CALIBRATION_SELF_SCORE
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.prompts or not all(isinstance(p, str) and p.strip() for p in self.prompts):
            raise CalibrationError("prompts: need at least one non-empty prompt")
        for name, lo in (("seeds", 1), ("steps", 1), ("batch", 1), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise CalibrationError(f"{name} must be an int >= {lo}; got {v!r}")
        if self.budget_s is not None and not self.budget_s > 0:
            raise CalibrationInputError("budget_minutes", f"is {self.budget_s / 60:.3g} min",
                                        "give a positive number of minutes, or no budget")
        if len(self.prompts) * self.seeds < 2:
            raise CalibrationError("prompts: a paired interval needs at least 2 images; give 2 "
                                   "or more prompts, or seeds >= 2")

    @property
    def items(self) -> list[str]:
        return [p for p in self.prompts for _ in range(self.seeds)]

    @property
    def groups(self) -> list[int]:
        return [i for i in range(len(self.prompts)) for _ in range(self.seeds)]

    def key(self, fingerprint: str, weights: str) -> dict[str, Any]:
        d = asdict(self)
        d.pop("budget_s")
        d.pop("batch")  # item k's image: the same in any batch on a CPU, nearly always on a GPU
        d["prompts"] = list(self.prompts)
        return {"fingerprint": fingerprint, "weights": weights, **d}


@dataclass
class Calibration:
    """One calibration of ``pipe`` (module docstring); ``run()`` returns the measured runs."""

    pipe: Any
    config: CalibrationConfig
    state_path: Path | None = None
    key: dict[str, Any] = field(default_factory=dict)
    progress: Progress | None = None
    check: Callable[[], None] | None = None
    candidates: list[Candidate] | None = None
    clock: Callable[[], float] = time.perf_counter

    def __post_init__(self) -> None:
        stored = load_partial(self.state_path, self.key) if self.state_path else None
        self.state: dict[str, Any] = stored or {"key": self.key, "runs": {}}
        self.resumed = sum(len(r["chunks"]) for r in self.state["runs"].values())
        self.skipped: list[dict[str, str]] = []
        self._start = self.clock()
        self._item_call_s: float | None = None
        self._sheet = set(sheet_items(len(self.config.prompts), self.config.seeds))

    # ---- public --------------------------------------------------------------------------
    def run(self) -> dict[str, dict[str, Any]]:
        """Run (or resume) every candidate; {name: run record} in run order."""
        cands = self.candidates or default_candidates(self.config.steps)
        self._check_budget(cands)
        done: dict[str, dict[str, Any]] = {}
        for i, cand in enumerate(cands):  # progress: candidate i owns [i, i + 1) / len(cands)
            slot = (i / len(cands), (i + 1) / len(cands))
            if not self._fits(cand):
                self.skipped.append({"name": cand.name, "reason": "budget"})
                continue
            half = slot if cand.role == "reference" else (slot[0], sum(slot) / 2)
            done[cand.name] = self._run(cand, half)
            if cand.role == "reference":
                continue
            match = matched_baseline(done[cand.name]["nfe_mean"])
            done[cand.name]["matched"] = match.name
            if match.name not in done:
                if self._fits(match):
                    done[match.name] = self._run(match, (sum(slot) / 2, slot[1]))
                else:
                    self.skipped.append({"name": match.name, "reason": "budget"})
        self._emit(1.0, "done")
        return done

    # ---- budget ---------------------------------------------------------------------------
    def _estimate_calls(self, cand: Candidate) -> float:
        """Denoiser calls per item: T for a baseline, T / 3 for LADR (a guess), plus the
        self-score's passes."""
        t = cand.steps if cand.role != "candidate" else max(1.0, cand.steps * LADR_NFE_GUESS)
        return t + self.config.self_score.passes

    def _probe(self) -> float:
        """Seconds per item and denoiser call: from finished chunks, else one timed call, after
        an untimed one when compiled or off the CPU (first CUDA work loads kernels lazily:
        seconds no later call pays, which would make a budget look too small)."""
        if self._item_call_s is not None:
            return self._item_call_s
        items = self.config.items[: self.config.batch]
        denoise = self.pipe.make_denoiser(items, width=self.config.size,
                                          height=self.config.size, cfg=self.config.cfg)
        tokens = torch.zeros(len(items), denoise.layout.n_codes, dtype=torch.long)
        masked = torch.ones_like(tokens, dtype=torch.bool)
        compiled = getattr(self.pipe, "compiled", None) is not None
        if compiled or torch.device(self.pipe.device).type != "cpu":  # warm up off the clock
            synchronize(denoise(tokens, masked).device)
        start = self.clock()
        synchronize(denoise(tokens, masked).device)  # time the work, not its queueing
        return (self.clock() - start) / len(items)

    def _check_budget(self, cands: list[Candidate]) -> None:
        if self.config.budget_s is None:
            return
        n = len(self.config.items)
        ref, first = cands[0], next((c for c in cands if c.role == "candidate"), None)
        need = self._estimate_calls(ref) + (2 * self._estimate_calls(first) if first else 0)
        need_s = need * n * self._probe()
        if need_s > self.config.budget_s:
            raise CalibrationInputError(
                "budget_minutes", f"is {self.config.budget_s / 60:.3g} min, too short for the "
                f"reference and one candidate (about {need_s / 60:.2g} min for {n} images on "
                "this device)", f"raise it to at least {math.ceil(need_s / 60)}, or use fewer "
                "prompts or seeds or a smaller size")

    def _fits(self, cand: Candidate) -> bool:
        if self.config.budget_s is None or cand.name in self.state["runs"] and self._complete(
                self.state["runs"][cand.name]):
            return True
        est = self._estimate_calls(cand) * len(self.config.items) * self._probe()
        return self.clock() - self._start + est <= self.config.budget_s

    # ---- one candidate ---------------------------------------------------------------------
    def _complete(self, stored: dict[str, Any]) -> bool:
        return sum(len(c["nfe"]) for c in stored["chunks"].values()) == len(self.config.items)

    def _run(self, cand: Candidate, slot: tuple[float, float]) -> dict[str, Any]:
        """All chunks of one candidate (stored ones reused); progress runs through ``slot``."""
        cfg = self.config
        items = cfg.items
        stored = self.state["runs"].setdefault(cand.name, {"chunks": {}})
        stored["spec"] = repr((cand.strategy, cand.steps))
        for lo in range(0, len(items), cfg.batch):
            if str(lo) in stored["chunks"]:
                continue
            if self.check is not None:
                self.check()
            hi = min(len(items), lo + cfg.batch)
            stored["chunks"][str(lo)] = self._chunk(cand, lo, hi, slot)
            if self.state_path is not None:
                write_json_atomic(self.state_path, self.state)
        return self._merge(cand, stored)

    def _chunk(self, cand: Candidate, lo: int, hi: int, slot: tuple[float, float]
               ) -> dict[str, Any]:
        """Generate items [lo, hi), count each image's NFE, self-score the final tokens."""
        cfg, items = self.config, self.config.items
        calls = [0]

        def on_step(record: dict) -> None:
            if self.check is not None:
                self.check()
            calls[0] += 1
            inside = (lo + (hi - lo) * min(1.0, calls[0] / cand.steps)) / len(items)
            self._emit(slot[0] + (slot[1] - slot[0]) * inside, f"{cand.name}: images "
                       f"{lo + 1}-{hi} of {len(items)}, step {calls[0]}")

        res = self.pipe.generate(items[lo:hi], width=cfg.size, height=cfg.size, steps=cand.steps,
                                 cfg=cfg.cfg, seed=cfg.seed + lo, strategy=cand.strategy,
                                 decode=False, callback=on_step)
        nfe = torch.tensor(res.item_nfe)  # each image's forwards, as in its own single run
        start = self.clock()
        score = self.pipe.self_score(res.tokens, items[lo:hi], width=cfg.size, height=cfg.size,
                                     cfg=cfg.cfg, seed=cfg.seed + lo, config=cfg.self_score,
                                     chunk=hi - lo)
        score_s = self.clock() - start
        calls = int(nfe.sum()) + cfg.self_score.passes * (hi - lo)
        self._item_call_s = (res.seconds + score_s) / max(1, calls)
        return {"nfe": nfe.tolist(), "token_forwards": [float(v) for v in res.item_token_forwards],
                "calls": res.nfe, "items": hi - lo, "seconds": res.seconds,
                "score_seconds": score_s,
                "scores": {k: getattr(score, k).tolist() for k in KINDS},
                # the contact sheet's items (sheet.py): their final tokens, by item index
                "sheet_tokens": {str(i): res.tokens[i - lo].tolist() for i in sorted(self._sheet)
                                 if lo <= i < hi}}

    def _merge(self, cand: Candidate, stored: dict[str, Any]) -> dict[str, Any]:
        chunks = [stored["chunks"][k] for k in sorted(stored["chunks"], key=int)]
        nfe = [v for c in chunks for v in c["nfe"]]
        kind = self.config.self_score.kind
        return {"candidate": cand, "nfe": nfe, "nfe_mean": sum(nfe) / len(nfe),
                "token_forwards": [v for c in chunks for v in c["token_forwards"]],
                "seconds": sum(c["seconds"] for c in chunks),
                "row_calls": sum(c["calls"] * c["items"] for c in chunks),
                # denoiser calls as made: each chunk's sampler calls and its one scoring call
                "denoiser_calls": sum(c["calls"] + 1 for c in chunks),
                "score_seconds": sum(c["score_seconds"] for c in chunks),
                "scores": {k: [v for c in chunks for v in c["scores"][k]] for k in KINDS},
                "self_score": [v for c in chunks for v in c["scores"][kind]],
                "sheet_tokens": {int(k): v for c in chunks
                                 for k, v in c.get("sheet_tokens", {}).items()}}

    def _emit(self, fraction: float, message: str) -> None:
        if self.progress is not None:
            self.progress(min(1.0, max(0.0, fraction)), message)
