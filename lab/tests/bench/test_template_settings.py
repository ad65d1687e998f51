"""lab/studies/template_settings.py and the nano templates' strategy (lab/workflows/build_examples.py
NANO_STRATEGY): the tasks come from the shipped templates, each candidate is the setting the
validation results name, and the committed results say what the builder's comment says."""

from __future__ import annotations

import json

import pytest
from support import ROOT

from lab.studies import rivals
from lab.studies import template_settings as ts
from lab.workflows.graph import nano_templates

RESULTS = ROOT / "lab" / "results"


def _sampler(wf: dict) -> dict:
    (kw,) = [n["inputs"] for n in wf.values() if n["class_type"] == ts.SAMPLER]
    return kw


def test_tasks_are_every_prompt_of_every_nano_template() -> None:
    tasks = ts.tasks()
    for path in nano_templates():
        for node in json.loads(path.read_text()).values():
            if node["class_type"] != ts.SAMPLER:
                continue
            kw = node["inputs"]
            lines = kw["prompt"].splitlines() if kw["one_prompt_per_line"] else [kw["prompt"]]
            for line in filter(str.strip, lines):
                assert any(t["prompt"] == line.strip() and path.stem in t["templates"]
                           for t in tasks.values()), (path.stem, line)
    assert all(t["templates"] for t in tasks.values())
    extra = ts.tasks(["two squares"])["two squares"]
    assert extra["templates"] == []
    assert not ts.paints(extra["wf"], extra["wf"][extra["sampler"]]["inputs"])


@pytest.mark.parametrize("candidate", list(ts.CANDIDATES))
def test_a_variant_runs_the_candidate_on_many_seeds_and_nothing_else(candidate: str) -> None:
    task = next(iter(ts.tasks().values()))
    wf = ts.variant(task, ts.CANDIDATES[candidate], 5)
    kw = wf[task["sampler"]]["inputs"]
    canvas, rule = (wf[kw[k][0]]["inputs"] for k in ("canvas", "rule"))
    assert (canvas["batch_size"], kw["seed"], kw["one_prompt_per_line"]) == (5, 0, False)
    assert rule["strategy"] == ts.CANDIDATES[candidate]["strategy"]
    assert ("policy" in rule) == (rule["strategy"] == "ladr")
    decodes = [n for n in wf.values() if n["class_type"] == "LADR_DiMOOVQDecode"]
    assert [d["inputs"]["tokens"][0] for d in decodes] == [task["sampler"]]
    assert _sampler(task["wf"]) is not kw  # the template is not changed


@pytest.mark.parametrize("candidate", list(ts.VALIDATION))
def test_each_candidate_is_the_setting_the_validation_results_name(candidate: str) -> None:
    """What the sampler node runs for the candidate is the setting samplers_validation.json
    measured (rivals.build of its setting string)."""
    from nodes import AUTO, PolicyFields, RuleFields, build_rule, build_strategy

    setting = ts.CANDIDATES[candidate]
    policy = None
    if "policy" in setting:
        fields = {k: v for k, v in ts._policy_node(setting["policy"])["inputs"].items()
                  if k != "preset"}
        policy = build_strategy(setting["policy"], PolicyFields(**fields))
    chosen = build_rule(setting["strategy"], policy,
                        RuleFields(tau=setting.get("tau", AUTO))).strategy
    assert chosen == rivals.build(ts.VALIDATION[candidate])
    assert setting.get("steps", 64) == rivals.table_entry(ts.VALIDATION[candidate])["steps"]
    assert ts.VALIDATION[candidate] in json.loads(
        (RESULTS / "samplers_validation.json").read_text())["settings"]


def test_the_templates_strategy_is_the_best_measured_on_nano() -> None:
    """Every shipped nano template's sampler (but the official sampler the side-by-side one
    compares with) runs the candidate with the best overall pass rate on nano's validation
    prompts, which also has the best mean pass rate over the templates' own tasks."""
    val = json.loads((RESULTS / "samplers_validation.json").read_text())["settings"]
    own = json.loads((RESULTS / "template_settings.json").read_text())
    best = max(ts.VALIDATION, key=lambda c: val[ts.VALIDATION[c]]["score_overall"])
    means = own["mean_pass_rate"]
    assert set(means) == set(ts.CANDIDATES) and own["meta"]["seeds"] >= 16
    assert means[best] == max(means.values()), means
    shipped = {n["inputs"]["strategy"] for p in nano_templates()
               for n in json.loads(p.read_text()).values()
               if n["class_type"] == "LADR_SamplingRule" and n["inputs"]["strategy"] != "baseline"}
    assert shipped == {ts.CANDIDATES[best]["strategy"]}


def test_the_figures_the_builder_cites_are_the_results_files() -> None:
    """lab/workflows/build_examples.py's comment on NANO_STRATEGY cites these files' figures."""
    text = " ".join((ROOT / "lab" / "workflows" / "build_examples.py").read_text()
                    .replace("#", " ").split())
    val = json.loads((RESULTS / "samplers_validation.json").read_text())["settings"]
    own = json.loads((RESULTS / "template_settings.json").read_text())
    for setting in ts.VALIDATION.values():
        row = val[setting]
        assert f"{row['score_overall']:.3f}" in text and f"{row['score']['position']:.3f}" in text
    names = {"ladr (nano preset)": "the nano LADR preset"}
    for cand, mean in own["mean_pass_rate"].items():
        assert f"{names.get(cand, cand)} {mean:.3f}" in text, cand
    order = ["ladr-global", "baseline-64", "halton-ladr", "ladr (nano preset)"]
    for name, task in own["tasks"].items():
        counts = ", ".join(str(sum(task["candidates"][c]["passed"])) for c in order)
        label = ("inpainting" if "inpaint" in name else "outpainting" if "outpaint" in name
                 else f'"{name}":')
        if label.startswith('"') and label not in text:
            continue  # not every text prompt's figures are cited
        assert f"{label} {counts}" in text, (name, counts)


def test_every_prompt_a_nano_template_shows_was_measured() -> None:
    """Each shipped nano template's prompt has its pass rate over the seeds in a results file
    (the templates as measured, or a prompt measured to replace one), and a replacement passes
    more often than the prompt it replaced, with the shipped strategy."""
    runs = {n: json.loads((RESULTS / n).read_text())["tasks"]
            for n in ("template_settings.json", "template_settings_extra.json",
                      "template_settings_img2img.json")}
    rates = {key: {c: sum(v["passed"]) for c, v in task["candidates"].items()}
             for tasks in runs.values() for key, task in tasks.items()}
    by_strategy = {s["strategy"]: c for c, s in ts.CANDIDATES.items()}
    # the templates as measured: all at 3e0f2f1, the image-to-image one when it was added
    before, now = {**runs["template_settings.json"],
                   **runs["template_settings_img2img.json"]}, ts.tasks()
    builder = " ".join((ROOT / "lab" / "workflows" / "build_examples.py").read_text().split())
    for name, task in now.items():
        assert name in rates, f"{name!r} ({task['templates']}) was never measured"
        if name in before:
            continue
        gone = [k for k, t in before.items()
                if k not in now and set(t["templates"]) & set(task["templates"])]
        rule = task["wf"][task["sampler"]]["inputs"]["rule"][0]
        strategy = task["wf"][rule]["inputs"]["strategy"]
        chosen = by_strategy[strategy]
        assert gone and all(rates[name][chosen] > rates[g][chosen] for g in gone), name
        seeds = json.loads((RESULTS / "template_settings.json").read_text())["meta"]["seeds"]
        for g in gone:  # the figures build_examples.py cites for the replacement
            assert (f'"{name}" instead of "{g}", which nano draws at {rates[g][chosen]} of '
                    f"{seeds} seeds with {strategy} ({rates[name][chosen]} of {seeds}") in builder


def test_the_image_to_image_templates_figures_are_its_results_file() -> None:
    """The redraw pass counts build_examples.py cites are template_settings_img2img.json's."""
    tasks = json.loads((RESULTS / "template_settings_img2img.json").read_text())["tasks"]
    passed = {name: sum(t["candidates"]["ladr-global"]["passed"]) for name, t in tasks.items()}
    redraws = [passed[n] for n in sorted(passed) if " at denoise " in n]
    first = next(v for n, v in passed.items() if " at denoise " not in n)
    builder = " ".join((ROOT / "lab" / "workflows" / "build_examples.py").read_text().split())
    assert len(redraws) == 3 and (f"pass {redraws[0]}, {redraws[1]} and {redraws[2]} of 32 at "
                                  "denoise 0.25, 0.5 and 0.75") in builder
    assert f"(the first picture's prompt: {first} of 32 seeds)" in builder
