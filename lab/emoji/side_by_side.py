"""The verdicts README gives, on both testbeds side by side: DiMOO-nano (flat shapes) and the
emoji model (drawn pictures). ``python -m lab.emoji.side_by_side [--docs]`` prints the table, or
with ``--docs`` writes it into docs/reports/TESTBEDS.md between its markers.

Each claim names where each testbed's figure comes from: nano's from the results file README
cites for the row (lab.studies.readme_tables, the reader README's own test uses) or from the
study file the claim's report rests on; the emoji model's from ``lab/results/emoji_verdicts.json``
(``python -m lab.emoji.verdicts``), or, while that file does not exist, from the gate run
``emoji_verdicts_gate.json``. Every figure is a paired 95 % interval of a difference on test
prompts, read from the file (or, for image to image, the paired bootstrap of the two routes'
per-prompt verdicts the files hold). An interval that includes 0 is "no difference detected",
never "equal". A claim travels when both testbeds give the same verdict; it disagrees when they
differ; it is not measured when a testbed has no figure (the reason is shown).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from lab.studies.paired_stats import group_index, paired_bootstrap, scores
from lab.studies.readme_tables import cited_file, same_forwards

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "lab" / "results"
PAGE = ROOT / "docs" / "reports" / "TESTBEDS.md"
EMOJI_FILES = ("emoji_verdicts.json", "emoji_verdicts_gate.json")
"""The emoji column's file: the full run when it exists, else the gate run."""
STRENGTHS = ("0.25", "0.5", "0.75")
BETTER, WORSE, UNDECIDED = "better", "worse", "no difference detected"
REFERENCE = "recommends the reference"


@dataclass(frozen=True)
class Figure:
    """One testbed's verdict on a claim: a paired 95 % interval of a difference (diff, lo, hi)
    or, for a recommendation that is the reference itself, `word` alone."""
    diff: float | None
    lo: float | None
    hi: float | None
    detail: str
    where: str
    word: str = ""

    @property
    def verdict(self) -> str:
        if self.word:
            return self.word
        return BETTER if self.lo > 0 else WORSE if self.hi < 0 else UNDECIDED


@dataclass(frozen=True)
class Missing:
    """No figure on this testbed, and why."""
    reason: str
    where: str = ""


Reading = Figure | Missing
Reader = Callable[[dict[str, Any]], Reading]


def travel(nano: Reading, emoji: Reading) -> str:
    """The rule: the same verdict on both = travels; different = disagrees; one missing = not
    measured."""
    if isinstance(nano, Missing) or isinstance(emoji, Missing):
        return "not measured"
    return "travels" if nano.verdict == emoji.verdict else "disagrees"


@cache
def nano_doc(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def emoji_doc() -> tuple[str, dict[str, Any]] | None:
    """(file name, document) of the emoji column (EMOJI_FILES, first present), or None."""
    for name in EMOJI_FILES:
        if (RESULTS / name).is_file():
            return name, json.loads((RESULTS / name).read_text(encoding="utf-8"))
    return None


def _dig(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _overall(row: dict[str, Any]) -> dict[str, float]:
    """The overall paired difference of a compare row, in each study's spelling."""
    return (row.get("diff") or {}).get("overall") or row.get("overall_diff") or row["pass_diff"]


def _where(name: str, path: tuple[str, ...], rest: str) -> str:
    return ", ".join(x for x in (name, ".".join(path), rest) if x)


def paired(name: str, path: tuple[str, ...], a: str, against: str) -> Reader:
    """Reader of `a` against the official sampler (`against` "64": at 64 steps; "same": at
    a's forwards; else that setting) in the section at `path` of a results file `name` ("" for
    the emoji file), which holds settings (`strategies` or `settings`) and `compare` rows. The
    reader's `where` says where it looks before it has read anything."""
    def read(doc: dict[str, Any]) -> Reading:
        sec = _dig(doc, path)
        runs = (sec or {}).get("strategies") or (sec or {}).get("settings") or {}
        if a not in runs:
            return Missing(f"the file has no `{a}` setting", read.where)
        refs = {"64": ("baseline-64",), "same": same_forwards(a, runs[a]["nfe_mean"])}
        refs = refs.get(against, (against,))
        row = next((c for b in refs for c in sec.get("compare", [])
                    if c["a"] == a and c["b"] == b), None)
        if row is None:
            return Missing(f"the file compares `{a}` with none of {', '.join(refs)}", read.where)
        d, run = _overall(row), runs[a]
        n = len(run["passed"]) if "passed" in run else None
        detail = (f"`{a}` {run['score_overall']:.3f} at {run['nfe_mean']:.1f} forwards vs "
                  f"`{row['b']}`" + (f"; {n} prompts" if n else ""))
        return Figure(d["diff"], d["lo"], d["hi"], detail,
                      _where(name, path, f"compare `{a}` - `{row['b']}`"))
    ref = {"64": "`baseline-64`", "same": "the official sampler at its forwards"}
    read.where = _where(name, path, f"compare `{a}` - {ref.get(against, f'`{against}`')}")
    return read


def nano_paired(name: str | None, a: str, against: str, path: tuple[str, ...] = ()
                ) -> Callable[[], Reading]:
    """nano's reading from `name`, or from the file README cites for `a`'s row."""
    def read() -> Reading:
        file = name or cited_file(a).removeprefix("lab/results/")
        return paired(file, path, a, against)(nano_doc(file))
    return read


def nano_groups(n: int) -> np.ndarray:
    from lab.nano import scenes

    return group_index([scenes.group_of(s) for s in scenes.quality_test_specs(n)])


def emoji_groups(doc: dict[str, Any]) -> np.ndarray:
    """The emoji test prompts' categories, rebuilt as the harness drew them; the captions must
    be the file's."""
    from lab.emoji.verdicts import prompt_scenes

    p = doc["prompts"]
    scenes = prompt_scenes(p["test"], "test", p["spec_seed"])
    if [sc.caption for sc in scenes] != p["captions"]:
        raise ValueError("the emoji results file's test captions are not the ones "
                         "lab.emoji.verdicts.prompt_scenes draws: rerun python -m lab.emoji.verdicts")
    return group_index([sc.spec.category for sc in scenes])


def routes_figure(picture: list[bool], token: list[bool], gidx: np.ndarray, where: str
                  ) -> Figure:
    """The picture route minus the token route (baseline-64's pass rate), paired over prompts."""
    d = paired_bootstrap(np.array(picture), np.array(token), gidx)["overall"]
    pic, tok = (scores(np.array(x), gidx)["overall"] for x in (picture, token))
    return Figure(d["diff"], d["lo"], d["hi"], f"picture {pic:.3f} vs token {tok:.3f}; "
                  f"{len(picture)} prompts", where)


def nano_routes(strength: str) -> Reading:
    """nano: the picture route (strength.json) against the token route (strength_sampled.json)."""
    pic, tok = (nano_doc(n)["strengths"][strength]["baseline-64"]["own"]["passed"]
                for n in ("strength.json", "strength_sampled.json"))
    return routes_figure(pic, tok, nano_groups(len(pic)), "strength.json (picture) and "
                         f"strength_sampled.json (token), strengths.{strength}.baseline-64.own.passed")


def emoji_routes(strength: str) -> Reader:
    where = f"i2i.picture and i2i.token, {strength}.settings.baseline-64.passed"

    def read(doc: dict[str, Any]) -> Reading:
        rows = [_dig(doc, ("i2i", r, strength, "settings", "baseline-64"))
                for r in ("picture", "token")]
        if None in rows:
            return Missing(f"the file has no image to image by both routes at {strength}", where)
        return routes_figure(rows[0]["passed"], rows[1]["passed"], emoji_groups(doc), where)
    read.where = where
    return read


def nano_calibration() -> Reading:
    """nano: what the product's calibration recommended on 48 prompts (CALIBRATION.md Sec. 3)."""
    name = "calibration_nano_48.json"
    doc = nano_doc(name)
    cond, rec = doc["conditions"], doc["recommended"]
    where = f"{name}, recommended"
    if rec == f"baseline-{cond['steps']}":
        return Figure(None, None, None, f"`{rec}` on {cond['prompts']} prompts: no cheaper "
                      "setting shown to lose at most the margin", where, word=REFERENCE)
    return Missing(f"recommends `{rec}`; the file holds no evaluator verdict of it", where)


def emoji_calibration(doc: dict[str, Any]) -> Reading:
    """The calibration's pick on the validation captions, and the judge's verdict of it on the
    test prompts."""
    cal = doc.get("calibration")
    if not isinstance(cal, dict):
        return Missing("the file has no calibration section", "calibration")
    rec = cal["recommended"]
    if rec == f"baseline-{doc['baseline']['steps']}":
        return Figure(None, None, None, f"`{rec}` on the validation captions",
                      "calibration.recommended", word=REFERENCE)
    fig = _CALIBRATED(doc)
    if isinstance(fig, Missing):
        return fig
    return Figure(fig.diff, fig.lo, fig.hi, f"recommends `{rec}`; {fig.detail}",
                  f"calibration.recommended; {fig.where}")


_CALIBRATED = paired("", ("t2i",), "calibrated", "64")
emoji_calibration.where = f"calibration.recommended; {_CALIBRATED.where}"


def understanding_figure(u: dict[str, Any], where: str) -> Reading:
    """The fastest answer rule within the official order's interval against the official
    order (lab.studies.understanding's file)."""
    fast = u["pick"]["fastest_within"]
    d = u["compare"][fast]["vs_official"]["overall"]
    off, rule = u["rules"]["official"], u["rules"][fast]
    return Figure(d["diff"], d["lo"], d["hi"], f"official order {off['accuracy']['overall']:.2f}"
                  f" right at {off['nfe_mean']:.0f} forwards, `{fast}` "
                  f"{rule['accuracy']['overall']:.2f} at {rule['nfe_mean']:.1f}; "
                  f"{len(off['correct'])} questions", f"{where}, compare.{fast}.vs_official")


def emoji_understanding(doc: dict[str, Any]) -> Reading:
    u = doc.get("understanding")
    if isinstance(u, dict):
        try:
            return understanding_figure(u, "understanding")
        except KeyError as missing:
            return Missing(f"the understanding section lacks {missing} (the layout of "
                           "lab.studies.understanding's file is what this page reads)",
                           "understanding")
    return Missing(u.removeprefix("not run: ") if isinstance(u, str)
                   else "the file has no understanding section",
                   "understanding")


emoji_understanding.where = "understanding"


def gated(read: Reader) -> Reader:
    """An emoji reader that first says whether the harness compared anything at all."""
    def inner(doc: dict[str, Any]) -> Reading:
        if not doc["gate"]["passed"]:
            return Missing(f"the gate refused at training step {doc['checkpoint']['step']:,}",
                           inner.where)
        return read(doc)
    inner.where = read.where
    return inner


@dataclass(frozen=True)
class Claim:
    """A verdict README gives, and how each testbed's figure for it is read."""
    text: str
    nano: Callable[[], Reading]
    emoji: Reader


def _t2i(a: str, against: str) -> Reader:
    return gated(paired("", ("t2i",), a, against))


def _no_mlcache_nano(doc: dict[str, Any]) -> Reading:
    return Missing("the harness runs ML-Cache `ladr` on the paper's policy "
                   "(`ladr+mlcache-preset`, next row), not on `nano`")


_no_mlcache_nano.where = ""


CLAIMS: tuple[Claim, ...] = (
    Claim("LADR `nano` preset against the official sampler at 64 steps",
          nano_paired(None, "ladr-nano", "64"), _t2i("ladr-nano", "64")),
    Claim("LADR `nano` preset against the official sampler at the same forwards",
          nano_paired(None, "ladr-nano", "same"), _t2i("ladr-nano", "same")),
    Claim("`nano` + ML-Cache `ladr` against 64 steps",
          nano_paired(None, "ladr-nano+mlcache", "64"), gated(_no_mlcache_nano)),
    Claim("ML-Cache `ladr` against the same LADR policy without it (nano: on `nano`; emoji: on "
          "the paper's policy)", nano_paired(None, "ladr-nano+mlcache", "ladr-nano"),
          _t2i("ladr+mlcache-preset", "ladr")),
    Claim("The paper's policy against 64 steps",
          nano_paired("quality_test.json", "ladr", "64"), _t2i("ladr", "64")),
    Claim("The paper's policy against the same forwards",
          nano_paired("quality_test.json", "ladr", "same"), _t2i("ladr", "same")),
    Claim("`ladr-global-n18` (LADR's rescue without the frontier) against 64 steps",
          nano_paired(None, "ladr-global-n18", "64"), _t2i("ladr-global-n18", "64")),
    Claim("`ladr-global-n18` against the same forwards",
          nano_paired(None, "ladr-global-n18", "same"), _t2i("ladr-global-n18", "same")),
    Claim("`halton-ladr-n12` (LADR's rescue on a Halton order) against the same forwards",
          nano_paired(None, "halton-ladr-n12", "same"), _t2i("halton-ladr-n12", "same")),
    Claim("`threshold-n12` (Fast-dLLM's confidence threshold) against the same forwards",
          nano_paired(None, "threshold-n12", "same"), _t2i("threshold-n12", "same")),
    Claim("`entropy-n18` (EB-Sampler's entropy bound) against the same forwards",
          nano_paired(None, "entropy-n18", "same"), _t2i("entropy-n18", "same")),
    Claim("Calibration's recommendation (one cheaper than the reference judged against 64 "
          "steps on the test prompts)",
          nano_calibration, gated(emoji_calibration)),
    *(Claim(f"Image to image at strength {d}: the picture route (a picture's VQ encoding) "
            "against the token route (the tokens it was sampled with), official sampler",
            lambda d=d: nano_routes(d), gated(emoji_routes(d))) for d in STRENGTHS),
    Claim("Inpainting one object: `nano` against 64 steps",
          nano_paired("painting.json", "ladr-nano", "64", ("tasks", "object")),
          gated(paired("", ("inpaint",), "ladr-nano", "64"))),
    Claim("Inpainting one object: `nano` against the same forwards",
          nano_paired("painting.json", "ladr-nano", "same", ("tasks", "object")),
          gated(paired("", ("inpaint",), "ladr-nano", "same"))),
    Claim("Understanding: the fastest answer rule against the official order",
          lambda: understanding_figure(nano_doc("understanding.json"), "understanding.json"),
          gated(emoji_understanding)),
)


@dataclass(frozen=True)
class Row:
    claim: Claim
    nano: Reading
    emoji: Reading

    @property
    def travels(self) -> str:
        return travel(self.nano, self.emoji)


def rows(emoji: tuple[str, dict[str, Any]] | None = None, claims: tuple[Claim, ...] = CLAIMS
         ) -> list[Row]:
    """Every claim read on both testbeds; `emoji`: (file name, document), default the
    committed file (EMOJI_FILES)."""
    emoji = emoji_doc() if emoji is None else emoji
    none = Missing("no emoji results file: run python -m lab.emoji.verdicts")
    return [Row(c, c.nano(), c.emoji(emoji[1]) if emoji else none) for c in claims]


def disagreements(found: list[Row] | None = None) -> list[str]:
    """The claims on which the testbeds disagree: where README must say so."""
    return [r.claim.text for r in (rows() if found is None else found)
            if r.travels == "disagrees"]


def cell(r: Reading) -> str:
    if isinstance(r, Missing):
        return f"not measured: {r.reason}"
    if r.word:
        return f"{r.word} ({r.detail})"
    return f"{r.diff:+.3f} [{r.lo:+.3f}, {r.hi:+.3f}]: {r.verdict} ({r.detail})"


def travel_cell(row: Row) -> str:
    word = row.travels
    if word == "disagrees":
        return f"**disagrees** (nano: {row.nano.verdict}; emoji: {row.emoji.verdict})"
    return f"**{word}**" if word == "travels" else word


def emoji_line(emoji: tuple[str, dict[str, Any]] | None) -> str:
    """Which emoji file the column reads, of which checkpoint, and whether the gate passed."""
    if emoji is None:
        return "Emoji column: no results file yet (`python -m lab.emoji.verdicts`)."
    name, doc = emoji
    g, env = doc["gate"], doc.get("env") or {}
    head = (f"Emoji column: `lab/results/{name}` (checkpoint at training step "
            f"{doc['checkpoint']['step']:,}, {doc['prompts']['test']} test prompts, guidance "
            f"scale {doc['prompts']['cfg']}, commit {env.get('git_commit')}).")
    if g["passed"]:
        return head + f" Gate passed: {g['message']}."
    return head + (f" The gate refused: {g['message']}. So the emoji model has no verdict yet; "
                   "every emoji cell below is \"not measured\" until the harness passes the gate "
                   "on a later checkpoint.")


def block(found: list[Row], emoji: tuple[str, dict[str, Any]] | None) -> str:
    """The page's generated part: the source line, the table, the tally, the sources."""
    lines = [emoji_line(emoji), "", "| claim | DiMOO-nano | emoji model | travels? |",
             "|---|---|---|---|"]
    lines += [f"| {r.claim.text} | {cell(r.nano)} | {cell(r.emoji)} | {travel_cell(r)} |"
              for r in found]
    tally = {w: sum(r.travels == w for r in found)
             for w in ("travels", "disagrees", "not measured")}
    ename = f"`{emoji[0]}`" if emoji else "no file yet"
    lines += ["", f"{len(found)} claims: " + ", ".join(f"{n} {w}" for w, n in tally.items())
              + ".", "", "Where each figure comes from (files in `lab/results/`):", "",
              f"| claim | DiMOO-nano | emoji model ({ename}) |", "|---|---|---|"]
    lines += [f"| {r.claim.text} | {r.nano.where or '-'} | {r.emoji.where or '-'} |"
              for r in found]
    return "\n".join(lines)


MARKERS = re.compile(r"(<!-- side_by_side:begin table -->\n)(.*?)(<!-- side_by_side:end -->)",
                     re.S)


def page_with(text: str, body: str) -> str:
    """`text` with its generated block replaced by `body`."""
    if not MARKERS.search(text):
        raise ValueError(f"{PAGE} has no <!-- side_by_side:begin table --> ... "
                         "<!-- side_by_side:end --> block; restore the markers")
    return MARKERS.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(3), text)


def current_block() -> str:
    emoji = emoji_doc()
    return block(rows(emoji), emoji)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", action="store_true", help=f"write the table into {PAGE.name}")
    a = ap.parse_args(argv)
    emoji = emoji_doc()
    found = rows(emoji)
    body = block(found, emoji)
    if a.docs:
        PAGE.write_text(page_with(PAGE.read_text(encoding="utf-8"), body), encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
    else:
        print(body)
    print("\nclaims where the testbeds disagree (README must say so): "
          + ("; ".join(disagreements(found)) or "none"))


if __name__ == "__main__":
    main()
