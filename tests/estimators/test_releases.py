"""Trainer releases: the ranges each convention reproduces, ``--trainer``, and the run's own trainer."""

from __future__ import annotations

import pytest

from trajlens.estimators import parse_trainer, run_release, trainer_choice
from trajlens.estimators.identify import CANDIDATES
from trajlens.estimators.registry import ESTIMATOR_REGISTRY, release_conventions, render_readme_table
from trajlens.estimators.spec import CURRENT_RELEASES, Releases, TrainerRelease


def test_a_trainer_release_reads_as_a_version():
    assert parse_trainer("verl==0.8.0") == TrainerRelease("verl", (0, 8, 0))
    assert parse_trainer(" TRL==1.5 ") == TrainerRelease("trl", (1, 5))
    assert parse_trainer("verl") == TrainerRelease("verl", tuple(int(p) for p in CURRENT_RELEASES["verl"].split(".")))
    for bad in ("openrlhf==1.0", "verl==0.x", "verl==", "trl>=1.6"):
        with pytest.raises(ValueError, match="trainer must be|expected a release"):
            parse_trainer(bad)


@pytest.mark.parametrize(("releases", "version", "held"), [
    (Releases("verl", last="0.8"), "0.8.0", True),
    (Releases("verl", last="0.8"), "0.8.7", True),
    (Releases("verl", last="0.8"), "0.9.0", False),
    (Releases("verl", last="0.8"), "0.7", True),
    (Releases("verl", first="0.9"), "0.9", True),
    (Releases("verl", first="0.9"), "0.9.1", True),
    (Releases("verl", first="0.9"), "0.8.0", False),
    (Releases("trl", first="1.6"), "1.16.0", True),
    (Releases("trl", first="1.6"), "1.5.2", False),
    (Releases("trl", "1.6", "1.8"), "1.9", False),
    (Releases("trl"), "0.1", True),
])
def test_a_range_holds_its_releases_at_its_own_precision(releases, version, held):
    assert releases.holds(parse_trainer(f"{releases.trainer}=={version}")) is held
    assert not releases.holds(parse_trainer(("trl" if releases.trainer == "verl" else "verl") + "==" + version))


def test_each_release_picks_its_reinforce_plus_plus_rule():
    old = trainer_choice("reinforce_plus_plus", parse_trainer("verl==0.8.0"))
    assert old is not None and old.settings()["convention"] == "reset"
    for current in ("verl==0.9.0", "verl==0.9.1", "verl"):
        choice = trainer_choice("reinforce_plus_plus", parse_trainer(current))
        assert choice is not None and choice.settings()["convention"] == "carry"
    assert trainer_choice("reinforce_plus_plus", parse_trainer("trl==1.6")) is None  # TRL has no REINFORCE++
    assert trainer_choice("gdpo_trl", parse_trainer("trl==1.5")).settings()["convention"] == "trl-1.5"
    assert trainer_choice("gdpo_trl", parse_trainer("trl==1.6.0")).settings()["convention"] == "trl"


def test_current_verl_conventions_are_the_defaults():
    """Without --trainer on a verl run, or a run of no trainer, every estimator keeps its defaults."""
    current = parse_trainer("verl")
    for name, spec in ESTIMATOR_REGISTRY.items():
        choice = trainer_choice(name, current)
        if choice is not None and name != "sum_then_normalize":  # a TRL estimator, verl's rule on request
            assert choice.settings() == spec.defaults(), name


def test_the_run_names_its_trainer():
    assert run_release(None) == parse_trainer("verl")
    assert run_release("{}", "mini-swe-agent-v1") == parse_trainer("verl")
    assert run_release({}, "trl") == parse_trainer("trl")
    assert run_release('{"scale_rewards": "group", "num_generations": 8}') == parse_trainer("trl")
    assert run_release({"algorithm": {"adv_estimator": "grpo"}}, "parquet") == parse_trainer("verl")


def test_identify_names_the_release_range():
    docs = {candidate.label: candidate.doc for candidate in CANDIDATES}
    assert docs["verl_reinforce_pp"].startswith("verl >= 0.9 REINFORCE++")
    assert docs["verl_0.8_reinforce_pp"].startswith("verl <= 0.8 REINFORCE++")
    for candidate in CANDIDATES:
        for releases in candidate.releases:
            if releases.first or releases.last:
                assert candidate.doc.lower().startswith(str(releases).lower()), candidate


def test_the_readme_table_names_a_release_on_every_row():
    rows = render_readme_table().splitlines()[2:]
    assert len(rows) == len(ESTIMATOR_REGISTRY)
    for row in rows:
        version = row.split(" | ")[2]
        assert version == "trajlens" or any(f"{t} {v}" in version for t, v in (("verl", "0.9.0"), ("trl", "1.16.0"))), row
    assert "reinforce_plus_plus convention=reset: verl <= 0.8" in release_conventions()


@pytest.fixture(scope="module")
def verl_store(tmp_path_factory):
    from test_registry import _store

    return _store(tmp_path_factory.mktemp("releases"), {"algorithm": {"adv_estimator": "reinforce_plus_plus"}})


def _batches(store, label):
    return store.sql("SELECT * EXCLUDE (estimator) FROM advantage_batches WHERE estimator = $l ORDER BY step",
                     {"l": label})


def test_cli_trainer_picks_the_release_convention(verl_store, capsys):
    from polars.testing import assert_frame_equal

    from trajlens.cli._app import main

    path = str(verl_store.path)
    base = ["advantages", path, "--run", "tiny", "--estimator", "reinforce_plus_plus"]
    assert main([*base, "--trainer", "verl==0.8.0", "--label", "old"]) == 0
    assert main([*base, "--option", "convention=reset", "--label", "reset"]) == 0
    assert main([*base, "--label", "default"]) == 0
    assert main([*base, "--option", "convention=carry", "--label", "carry"]) == 0
    assert main([*base, "--trainer", "verl==0.8.0", "--option", "convention=carry", "--label", "wins"]) == 0
    capsys.readouterr()
    assert _batches(verl_store, "old").height > 0
    assert_frame_equal(_batches(verl_store, "old"), _batches(verl_store, "reset"))
    assert_frame_equal(_batches(verl_store, "default"), _batches(verl_store, "carry"))
    assert_frame_equal(_batches(verl_store, "wins"), _batches(verl_store, "carry"))
    assert main([*base, "--trainer", "verl==zero"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--trainer 'verl==zero'" in err[0]


@pytest.mark.parametrize(("trainer", "estimator", "said"), [
    ("trl==1.5", "reinforce_plus_plus", "TRL computes no reinforce_plus_plus (its conventions are verl's)"),
    ("verl==0.8.0", "gdpo_trl", "verl computes no gdpo_trl (its conventions are TRL's)"),
    ("verl", "grpo_batch_std", "verl computes no grpo_batch_std (its conventions are TRL's)"),
])
def test_trainer_of_no_convention_of_the_estimator_is_refused(verl_store, capsys, trainer, estimator, said):
    """Not the defaults saved under the bare name as if the release had computed them."""
    from trajlens.cli import main

    path = str(verl_store.path)
    assert main(["advantages", path, "--run", "tiny", "--estimator", estimator, "--trainer", trainer]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert "advantage_batches" not in verl_store.tables() or _batches(verl_store, estimator).height == 0


def test_an_estimator_of_no_trainer_runs_under_either():
    from trajlens.estimators.spec import TrainerRelease

    spec = ESTIMATOR_REGISTRY["reinforce"]
    assert spec.trainers() == () and spec.computed_by(TrainerRelease("trl", (1, 5)))
    assert ESTIMATOR_REGISTRY["grpo"].trainers() == ("verl", "trl")


@pytest.mark.parametrize("text, said", [
    ("verl==0.8.0", None), ("verl==0.8", None), ("verl==0.9.1", None), ("trl==1.6", None),
    ("verl==99", "verl 99 is newer than the newest verl release compared (0.9.1): computed as 0.9.1 computes, "
                 "which it may not"),
    ("verl==0.7.9", "verl 0.7.9 is older than the oldest verl release compared (0.8.0)"),
    ("trl==1.16.2", "TRL 1.16.2 is newer than the newest TRL release compared (1.16.0)"),
])
def test_a_release_outside_those_compared_is_said(text, said):
    from trajlens.estimators.spec import uncompared

    note = uncompared(parse_trainer(text))
    assert note == said if said is None else note.startswith(said)


def test_the_cli_notes_an_uncompared_release_and_still_computes(capsys):
    from trajlens.cli._options import parse_trainer_option

    assert str(parse_trainer_option("verl==99")) == "verl==99"
    assert capsys.readouterr().err.startswith("note: --trainer verl==99: verl 99 is newer than the newest")
