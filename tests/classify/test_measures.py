"""trajectory_measures on hand-built trajectories with hand-derived numbers."""

from __future__ import annotations

import json

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from trajlens.classify import BEHAVIOUR_CLASSES, classify_calls, trajectory_measures
from trajlens.classify.per_trajectory import MEASURES


def make_calls(trajectory_id: str, rows: list[tuple], step: int = 1) -> pl.DataFrame:
    """(tool_name, command or arguments dict[, format_error]) rows of one trajectory."""
    def arguments(value):
        return json.dumps(value) if isinstance(value, dict) else json.dumps({"command": value})

    return pl.DataFrame(
        {
            "run_id": "r",
            "step": step,
            "trajectory_id": trajectory_id,
            "call_index": list(range(len(rows))),
            "turn": list(range(len(rows))),
            "tool_name": [r[0] for r in rows],
            "arguments": [arguments(r[1]) for r in rows],
            "command": [r[1] if isinstance(r[1], str) else None for r in rows],
            "format_error": [len(r) > 2 and r[2] for r in rows],
        },
        schema_overrides={"call_index": pl.Int32, "turn": pl.Int32, "command": pl.String},
    )


THINK = ("think", {"thought": "..."})

# Ordinals (behaviour calls only) in the comments; the rejected think has none.
TRAJECTORY_A = [
    THINK,                                              # 0 think
    THINK,                                              # 1 think
    ("bash", "cat src/x.py"),                           # 2 view
    ("bash", "sed -i 's/a/b/' src/x.py"),               # 3 edit of x.py, not read back in 3 calls
    ("bash", "python -c 'import x'"),                   # 4 quick_check (first verification)
    ("think", {"thought": ""}, True),                   # -  rejected: not in any count, does not join runs
    THINK,                                              # 5 think
    THINK,                                              # 6 think
    ("bash", "nl -ba /testbed/src/x.py | sed -n '1,5p'"),  # 7 view of x.py, 4 calls after its edit
    ("bash", "cat > t.py <<'EOF'\nprint(1)\nEOF"),      # 8 edit of t.py
    ("bash", "pytest tests/test_t.py"),                 # 9 test_targeted
    ("bash", "cat t.py"),                               # 10 view of t.py: reads back the edit at 8
    ("bash", "cd /testbed && pytest -q"),               # 11 test_suite
    ("finish", {"message": "done"}),                    # 12 submit
]
TRAJECTORY_C = [THINK, THINK, THINK]


@pytest.fixture(scope="module")
def measures() -> pl.DataFrame:
    calls = pl.concat([make_calls("a", TRAJECTORY_A), make_calls("c", TRAJECTORY_C, step=2)])
    trajectories = pl.DataFrame(
        {
            "run_id": "r",
            "step": [1, 1, 2],
            "trajectory_id": ["a", "b", "c"],
            "num_turns": [10, 3, 0],
            "model_tokens": [4000, 100, None],
            "reasoning_tokens": [None, None, 7],
        },
        schema_overrides={"num_turns": pl.Int32, "model_tokens": pl.Int64, "reasoning_tokens": pl.Int64},
    )
    return trajectory_measures(classify_calls(calls), trajectories)


def row(measures: pl.DataFrame, trajectory_id: str) -> dict:
    return measures.filter(pl.col("trajectory_id") == trajectory_id).row(0, named=True)


def test_columns_are_the_documented_measures(measures):
    assert measures.columns == [m.name for m in MEASURES]
    assert all(m.doc for m in MEASURES)
    assert measures["trajectory_id"].to_list() == ["a", "b", "c"]


def test_counts_and_shares(measures):
    a = row(measures, "a")
    assert (a["n_calls"], a["n_format_errors"]) == (13, 1)
    counts = {c: a[f"count_{c}"] for c in BEHAVIOUR_CLASSES}
    assert counts == {"submit": 1, "test_suite": 1, "test_targeted": 1, "quick_check": 1, "run_script": 0,
                      "edit": 2, "view": 3, "search": 0, "think": 4, "other": 0}
    assert a["share_view"] == pytest.approx(3 / 13)
    assert a["share_think"] == pytest.approx(4 / 13)
    assert sum(a[f"share_{c}"] for c in BEHAVIOUR_CLASSES) == pytest.approx(1.0)


def test_think_runs(measures):
    a, c = row(measures, "a"), row(measures, "c")
    # A: runs {0, 1} and {5, 6}; the rejected think between 4 and 5 neither joins nor breaks them.
    assert (a["think_longest_run"], a["think_runs"]) == (2, 2)
    assert (c["think_longest_run"], c["think_runs"], c["share_think"]) == (3, 1, 1.0)


def test_verification_mix(measures):
    a, c = row(measures, "a"), row(measures, "c")
    assert a["n_verification"] == 3
    assert (a["suite_share"], a["targeted_share"], a["quick_check_share"], a["run_script_share"]) == pytest.approx(
        (1 / 3, 1 / 3, 1 / 3, 0.0))
    assert a["ran_suite"] is True
    assert (c["n_verification"], c["suite_share"], c["ran_suite"]) == (0, None, False)
    assert (a["first_verification_call"], a["first_verification_position"]) == (4, pytest.approx(4 / 13))
    assert c["first_verification_call"] is None


def test_edit_density_and_read_back(measures):
    a = row(measures, "a")
    assert a["n_edits"] == 2
    assert a["edits_per_turn"] == pytest.approx(0.2)
    assert a["edits_per_1k_tokens"] == pytest.approx(0.5)
    assert a["readback_share"] == pytest.approx(0.5)
    assert (a["num_turns"], a["model_tokens"]) == (10, 4000)


def test_trajectory_without_calls(measures):
    b = row(measures, "b")
    assert (b["n_calls"], b["count_edit"], b["ran_suite"]) == (0, 0, False)
    assert (b["share_edit"], b["share_think"], b["readback_share"], b["edits_per_1k_tokens"]) == (None, None, None, 0.0)
    assert b["edits_per_turn"] == 0.0
    c = row(measures, "c")
    assert (c["edits_per_turn"], c["edits_per_1k_tokens"], c["reasoning_tokens"]) == (None, None, 7)


def test_raw_calls_are_classified_first_and_trajectories_are_optional():
    calls = make_calls("a", TRAJECTORY_A)
    from_raw = trajectory_measures(calls)
    from_classified = trajectory_measures(classify_calls(calls))
    assert_frame_equal(from_raw, from_classified)
    assert from_raw["num_turns"].to_list() == [None]
    assert from_raw["n_calls"].to_list() == [13]


@pytest.mark.parametrize("thought, empty", [
    ("", True), (" ", True), ("...", True), ("Let me think.", True), ("Hmm.", True),
    ("The failure is in parse_date; fix it in utils.py", False),
])
def test_an_empty_or_filler_thought_counts_as_empty_think(thought, empty):
    calls = make_calls("t", [("think", {"thought": thought}), ("think", {"thought": thought}, True),
                             ("bash", "echo hi")])
    # The rejected think and the shell call never count, whatever they hold.
    assert row(trajectory_measures(calls), "t")["think_empty"] == int(empty)


@pytest.mark.parametrize("arguments, empty", [
    ('{"thought": "\\u2026\\u2026\\u2026\\u2026"}', True),  # "…………" as json.dumps escapes it
    ('{"thought": "' + "\\n" * 16 + '"}', True),
    ('{"thought": "Hmm.", "thoughtNumber": 12345678901234567, "nextThoughtNeeded": true}', True),
    ('{"thought": "\\u51fd\\u6570\\u5728\\u7a7a\\u8f93\\u5165\\u65f6\\u62a5\\u9519\\uff0c'
     '\\u5148\\u770b\\u6d4b\\u8bd5\\u518d\\u4fee\\u6539\\u5b9e\\u73b0"}', False),  # an escaped Chinese thought
])
def test_what_counts_in_a_thought_is_its_text_not_its_json(arguments, empty):
    calls = make_calls("t", [("think", {"thought": "x"})]).with_columns(pl.lit(arguments).alias("arguments"))
    assert row(trajectory_measures(calls), "t")["think_empty"] == int(empty)


def test_calls_without_their_arguments_cannot_tell_an_empty_thought(measures):
    calls = classify_calls(make_calls("a", TRAJECTORY_A)).drop("arguments", "command")
    found = row(trajectory_measures(calls), "a")
    assert found["think_empty"] is None and found["count_think"] == 4


def test_empty_think_counts(measures):
    # A: the four executed "..." thinks (the rejected one is not counted); C: three.
    assert (row(measures, "a")["think_empty"], row(measures, "c")["think_empty"], row(measures, "b")["think_empty"]) == (4, 3, 0)


def test_the_r6_collapse_fills_with_empty_thinks_and_r7_does_not(samples_store_path):
    """The digest's symptom: repeated, consecutive, empty think calls crowd out the work."""
    import trajlens

    store = trajlens.open(samples_store_path)

    def per_trajectory(run: str, first: int, last: int) -> float:
        chosen = (pl.col("run_id") == run) & pl.col("step").is_between(first, last)
        calls = store.tool_calls.filter(chosen).collect()
        return trajectory_measures(classify_calls(calls), store.trajectories.filter(chosen).collect())["think_empty"].mean()

    assert per_trajectory("sao-r6", 1, 30) < 1.5 and per_trajectory("sao-r6", 120, 135) > 15
    assert per_trajectory("sao-r7", 1, 30) < 1.5 and per_trajectory("sao-r7", 170, 200) < 1.5


def test_each_measure_has_one_column():
    """A share with two names (``think_share`` beside ``share_think``) became two check measures
    (``share:think`` and ``mean:think_share``) of one quantity."""
    from trajlens.classify.per_trajectory import MEASURES

    assert "think_share" not in [m.name for m in MEASURES]
    assert len({m.name for m in MEASURES}) == len(MEASURES)


def test_read_back_is_a_view_of_a_file_the_edit_changed():
    """mini-swe-agent backs a file up before editing it (``cp a.py a.py.backup``) and then reads
    ``a.py``: the copy changed only the backup, so that is no read-back (it counted as one). A
    view of the copy's destination, or of a file edited in place, is."""
    calls = classify_calls(make_calls("t", [
        ("bash", "cp src/a.py src/a.py.backup"),      # 0 edit: writes a.py.backup
        ("bash", "sed -n '1,40p' src/a.py"),          # 1 view of a.py, unchanged: no read-back of 0
        ("bash", "sed -i 's/x/y/' src/b.py"),         # 2 edit of b.py
        ("bash", "cat src/b.py"),                     # 3 read-back of 2
        ("bash", "cp src/c.py /tmp/c.py"),            # 4 edit: writes /tmp/c.py
        ("bash", "cat /tmp/c.py"),                    # 5 read-back of 4
    ]))
    (measured,) = trajectory_measures(calls).to_dicts()
    assert measured["n_edits"] == 3 and measured["readback_share"] == pytest.approx(2 / 3)
    # calls classified before edited_paths existed are matched on every path they name, as then
    (before,) = trajectory_measures(calls.drop("edited_paths")).to_dicts()
    assert before["readback_share"] == pytest.approx(1.0)
