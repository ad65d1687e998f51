"""Every bad sample() input is a ValueError naming the argument and the allowed range."""

from __future__ import annotations

import pytest
import torch

from ladr_core import LADR, LADRPolicy, Prophet, ProphetPolicy, sample
from tests.kit.fakes import LocalityDenoiser, make_table

DEN = LocalityDenoiser(make_table(1, 16, 8), (4, 4))


def _run(**kw):
    args = {"denoise": DEN, "shape": (1, 4, 4), "steps": 4}
    args.update(kw)
    return sample(**args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steps": 0}, r"^steps is 0; give a whole number of steps from 1 to 1000"),
        ({"steps": 2.5}, r"^steps is 2.5; give a whole number of steps"),
        ({"steps": True}, r"^steps is True; give a whole number of steps"),
        ({"steps": 1001}, r"^steps is 1001; give a whole number of steps from 1 to 1000"),
        ({"shape": (1, 4)}, r"shape must be 3 positive ints \(B, H, W\)"),
        ({"shape": (1, 0, 4)}, r"shape must be 3 positive ints"),
        ({"shape": (1, 4.0, 4)}, r"shape must be 3 positive ints"),
        ({"shape": "144"}, r"shape must be 3 positive ints"),
        ({"temperature": -0.1}, r"temperature must be a finite number >= 0"),
        ({"temperature": float("nan")}, r"temperature must be a finite number >= 0"),
        ({"temperature": "hot"}, r"temperature must be a finite number >= 0"),
        ({"strategy": "maskgit"}, r"strategy must be a Strategy object .*a strategy name "
                                  r"\['baseline', .*'ladr', .*'prophet', .*\] or an LADR preset name "
                                  r"\['paper', .*got 'maskgit'"),
        ({"strategy": LADRPolicy()}, r"strategy must be a Strategy object"),
        ({"cuda_graph": 1}, r"cuda_graph must be True or False"),
        ({"schedule": "sqrt"}, r"schedule must be one of \['cosine', 'linear'\]"),
        ({"generator": 0}, r"generator must be None, a torch.Generator or a list of B"),
        ({"generator": [torch.Generator(), torch.Generator()]},
         r"generator list must hold exactly B=1 torch.Generator"),
        ({"callback": 3}, r"callback must be None or callable"),
        ({"denoise": None}, r"denoise must be callable"),
        ({"device": "nowhere"}, r"device must be a torch.device"),
    ],
)
def test_bad_arguments(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        _run(**kwargs)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: LADR("paper"), r"LADR\(policy\): policy must be a LADRPolicy; got str"),
    (lambda: LADR(ProphetPolicy()), r"LADR\(policy\): policy must be a LADRPolicy; got "
                                    r"ProphetPolicy"),
    (lambda: Prophet({"thresholds": 1}), r"Prophet\(policy\): policy must be a ProphetPolicy"),
    (lambda: Prophet(LADRPolicy()), r"Prophet\(policy\): policy must be a ProphetPolicy; got "
                                    r"LADRPolicy"),
])
def test_a_strategy_checks_its_policy_type_once_on_construction(build, message) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_the_old_keyword_dialect_is_gone() -> None:
    """Policies travel inside strategy objects; sample() has no policy= / prophet= any more."""
    for kw in ({"policy": LADRPolicy()}, {"prophet": ProphetPolicy()}):
        with pytest.raises(TypeError, match="unexpected keyword"):
            _run(**kw)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel_size": 2}, r"kernel_size must be an odd integer >= 1"),
        ({"kernel_size": 0}, r"kernel_size must be an odd integer >= 1"),
        ({"kernel_size": -3}, r"kernel_size must be an odd integer >= 1"),
        ({"kernel_size": 3.0}, r"kernel_size must be an odd integer >= 1"),
        ({"tau": (0.05, 1.5, None)}, r"tau values must be None or in \[0, 1\]"),
        ({"tau": (-0.1, 0.05, None)}, r"tau values must be None or in \[0, 1\]"),
        ({"tau": (0.05, 0.05)}, r"tau must be a tuple of 3 values"),
        ({"alpha": (0.1, 0.3, 1.2)}, r"alpha values must be numbers in \[0, 1\]"),
        ({"alpha": (0.1, None, 1.0)}, r"alpha values must be numbers in \[0, 1\]"),
        ({"phase_bounds": (0.7, 0.2)}, r"phase_bounds must be monotone within \[0, 1\]"),
        ({"phase_bounds": (0.2, 1.5)}, r"phase_bounds must be monotone within \[0, 1\]"),
        ({"phase_bounds": (0.2,)}, r"phase_bounds must be a pair of numbers"),
        ({"metric": "entropy"}, r"metric must be one of \('margin', 'confidence', 'random'\)"),
        ({"candidates": "all"}, r"candidates must be one of \('neighbors', 'non_neighbors'"),
        ({"delayed": 1}, r"delayed must be True or False"),
        ({"selection": "noisy"}, r"selection must be one of \('top1', 'gumbel'\)"),
        ({"rescue_token": "mode"}, r"rescue_token must be one of \('sample', 'argmax'\)"),
        ({"seen_only": "yes"}, r"seen_only must be True or False"),
    ],
)
def test_bad_policy_fields(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        LADRPolicy(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"thresholds": (7.5, -1.0, 2.5)}, r"thresholds must be 3 finite numbers >= 0"),
        ({"thresholds": (7.5, 5.0)}, r"thresholds must be a tuple of 3 values"),
        ({"progress_bounds": (0.67, 0.33)}, r"progress_bounds must be monotone within \[0, 1\]"),
    ],
)
def test_bad_prophet_fields(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        ProphetPolicy(**kwargs)


def _returning(fn):
    return lambda tokens, masked: fn(tokens, masked)


@pytest.mark.parametrize(
    ("denoise", "message"),
    [
        (_returning(lambda t, m: torch.zeros(1, 10, 7)),
         r"denoise returned shape \(1, 10, 7\); expected \(B=1, N=16, K\) with K fixed"),
        (_returning(lambda t, m: torch.zeros(2, 16, 7)),
         r"denoise returned shape \(2, 16, 7\); expected \(B=1, N=16, K\)"),
        (_returning(lambda t, m: torch.zeros(1, 16)),
         r"denoise returned shape \(1, 16\); expected \(B=1, N=16, K\)"),
        (_returning(lambda t, m: torch.zeros(1, 16, 7, dtype=torch.long)),
         r"denoise returned dtype torch.int64; expected floating-point logits"),
        (_returning(lambda t, m: torch.zeros(1, 16, 1)), r"expected K >= 2"),
        (_returning(lambda t, m: [[0.0]]), r"denoise must return a torch.Tensor"),
    ],
)
def test_bad_denoiser_output(denoise, message) -> None:
    with pytest.raises(ValueError, match=message):
        _run(denoise=denoise)


def test_denoiser_changing_k_between_steps() -> None:
    calls = []

    def den(tokens, masked):
        calls.append(1)
        return torch.randn(1, 16, 8 if len(calls) == 1 else 9)

    with pytest.raises(ValueError, match=r"shape \(1, 16, 9\); expected \(B=1, N=16, K=8\)"):
        _run(denoise=den, temperature=0.0)
