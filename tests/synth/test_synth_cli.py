"""``trajlens synth``: a thin command over :func:`trajlens.synth.generate`."""

from __future__ import annotations

from trajlens.cli._app import main
from trajlens.synth import load_truth


def test_synth_writes_a_run_with_its_truth(tmp_path, capsys):
    out = tmp_path / "r6"
    code = main(["synth", "sao-r6", "--steps", "2", "--batch", "4", "--calls", "10", "--tokens", "200", "--out", str(out)])
    assert code == 0
    assert "wrote sao-r6 (2 steps, 8 trajectories" in capsys.readouterr().out
    assert load_truth(out)["sizes"]["batch"] == 4


def test_synth_errors_are_one_line(tmp_path, capsys):
    code = main(["synth", "nope", "--out", str(tmp_path / "x")])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown scenario 'nope'") and "\n" not in err
    from trajlens.synth.causal_spec import CAUSAL_SCENARIOS
    from trajlens.synth.generate import SCENARIOS

    assert all(name in err for name in (*SCENARIOS, *CAUSAL_SCENARIOS))  # every scenario synth takes
    code = main(["synth", "grpo-leg", "--batch", "12", "--out", str(tmp_path / "y")])
    assert code == 1 and "multiple of the group size 8" in capsys.readouterr().err
    # single rollouts: no group size to be a multiple of, only the bounds
    code = main(["synth", "sao-r6", "--batch", "1", "--out", str(tmp_path / "z")])
    assert code == 1 and capsys.readouterr().err == "error: --batch must be between 2 and 16,384, got 1\n"


def test_synth_help_has_an_example(capsys):
    code = main(["synth", "--help"])
    assert code == 0
    assert "Example: trajlens synth sao-r6 --out runs/r6" in " ".join(capsys.readouterr().out.split())
