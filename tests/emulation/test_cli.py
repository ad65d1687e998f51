"""``python -m tests.kit.cuda_emu``: one job on the emulated device, its summary, and one message
for each bad input naming the choices."""

from __future__ import annotations

import pytest

from tests.kit.cuda_emu.__main__ import LAYOUTS, main, run


def test_a_run_reports_the_loop_reads_and_no_violation(capsys) -> None:
    out = run(["--strategy", "baseline", "--steps", "6"])
    assert out["violations"] == [] and out["steps"] == 6
    assert out["loop_reads"] == 5  # one per step, none after the last
    assert out["peak_reserved_bytes"] >= out["peak_allocated_bytes"] > 0


@pytest.mark.parametrize(("argv", "named"), [
    (["--layout", "q9"], LAYOUTS), (["--strategy", "fast"], ("ladr", "baseline")),
    (["--cache", "big"], ("none", "official", "ladr"))])
def test_an_unknown_choice_is_one_message_naming_the_choices(argv, named, capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "invalid choice" in err and all(repr(n) in err for n in named)


def test_a_size_off_the_token_grid_is_the_packs_message() -> None:
    with pytest.raises(SystemExit, match="width=50 is not a multiple of 4.*nearest valid"):
        run(["--size", "50"])
