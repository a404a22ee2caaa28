"""``--watch`` against a live writer process that appends steps while the watcher reads."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from trajlens.checks import check_run, default_checks, parse_checks
from trajlens.checks.watch import RunFollower, WatchOptions, watch

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_data"
WRITER = Path(__file__).with_name("live_writer.py")


def start_writer(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WRITER), *map(str, args)], stderr=subprocess.PIPE, text=True)


def _verdicts(results) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {r.name: (r.status, r.fired_steps) for r in results}


def _step_lines(lines: list[str]) -> list[int]:
    return [int(line.split(":")[0].split()[1]) for line in lines if line.startswith("step ")]


def test_watch_follows_parquet_partitions_written_step_by_step(tmp_path):
    target = tmp_path / "live"
    target.mkdir()
    writer = start_writer("parquet", SAMPLES / "sao-r6", target, 112, 124, 0.15)
    lines: list[str] = []
    try:
        ended = watch(target, default_checks(), WatchOptions(poll=0.05, until_step=124, timeout=300), echo=lines.append)
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0, writer.stderr.read()
    assert ended.exit_code == 1 and ended.reason == "reached step 124"
    assert _step_lines(lines) == list(range(112, 125))  # one line per step, in order
    fired = {line.split()[1]: index for index, line in enumerate(lines) if line.startswith("  FIRED")}
    assert lines[fired["think_share"] - 1].startswith("step 112:")  # fired with the first step
    assert lines[fired["all_negative_streak"] - 1].startswith("step 121:")  # the third all-negative batch
    assert "at steps 119-121" in lines[fired["all_negative_streak"]]
    # incremental: every file read exactly once, and files were caught half-written and left
    follower = ended.follower
    assert all(count == 1 for count in Counter(follower.files_read).values())
    assert len(follower.files_read) == 1 + 13 * 4
    assert follower.unfinished_seen > 0
    # the same verdicts as checking the finished directory after the fact
    assert _verdicts(ended.run.results) == _verdicts(check_run(target).results)


def test_watch_metrics_jsonl_fail_fast_at_the_first_wrong_lr_step(tmp_path):
    target = tmp_path / "resume"
    target.mkdir()
    writer = start_writer("metrics", SAMPLES / "resume-lr", target, 60, 0.02)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trajlens", "check", target, "--watch", "--fail-fast", "--until-step", "60",
             "--timeout", "120", "--poll", "0.05", "--settle", "1"], capture_output=True, text=True, cwd=REPO)
    finally:
        writer.wait(timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert _step_lines(lines) == list(range(1, 42))
    assert any(line.startswith("  FIRED learning_rate_mismatch (error) at steps 41: ") for line in lines)
    assert "stopped (an error-level check fired at step 41) after 41 steps" in lines


REWARD_FLOOR = {"checks": {"reward_floor": {"measure": "reward", "condition": "threshold", "below": 2.0}}}


def _watch_verl_writer(target: Path, dumps: Path):
    """Watch ``target`` while a writer dumps steps 1-3 into ``dumps``: the watch's end, its lines and the check."""
    writer = start_writer("verl", REPO / "tests" / "data" / "verl" / "grpo-sandbox", dumps, 3, 0.1)
    (check,) = parse_checks(REWARD_FLOOR, "inline")
    lines: list[str] = []
    try:
        ended = watch(target, [check], WatchOptions(poll=0.05, settle=0.5, until_step=3, timeout=120),
                      echo=lines.append)
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0
    return ended, lines, check


def test_watch_verl_dumps_waits_for_complete_files(tmp_path):
    target = tmp_path / "rollouts"
    target.mkdir()
    ended, lines, check = _watch_verl_writer(target, target)
    assert _step_lines(lines) == [1, 2, 3]
    assert sorted(p.name for p in ended.follower.files_read) == ["1.jsonl", "2.jsonl", "3.jsonl"]
    assert _verdicts(ended.run.results) == _verdicts(check_run(target, [check]).results)
    assert ended.run.results[0].fired_steps == (1, 2, 3)


def test_watch_follows_the_rollout_folder_of_a_verl_experiment_folder(tmp_path):
    """An experiment folder (val/ beside the rollout folder verl creates once it dumps): check reads
    it as ingest does, and the watch saw no step and waited for ever. It now follows the rollout
    folder the plan names, once it appears, and never the validation folder."""
    import shutil

    target = tmp_path / "exp"
    shutil.copytree(REPO / "tests" / "data" / "verl" / "grpo-sandbox" / "val", target / "val")
    ended, lines, check = _watch_verl_writer(target, target / "rollout")
    assert ended.reason == "reached step 3" and _step_lines(lines) == [1, 2, 3]
    assert sorted(p.relative_to(target).as_posix() for p in ended.follower.files_read) == [
        "rollout/1.jsonl", "rollout/2.jsonl", "rollout/3.jsonl"]
    assert _verdicts(ended.run.results) == _verdicts(check_run(target, [check]).results)


def test_partial_metrics_line_is_never_read(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"_step": 1, "critic/lr": 1e-06}\n{"_step": 2, "critic/lr": 2e-')
    clock = [0.0]
    follower = RunFollower(tmp_path, settle=5.0, clock=lambda: clock[0])
    assert follower.poll() is None  # step 1 may still get scalars; step 2's line is unfinished
    with path.open("a") as handle:
        handle.write('06}\n{"_step": 3,')
    batch = follower.poll()
    assert batch.steps == [1] and batch.step_metrics["value"].to_list() == [1e-06]
    clock[0] = 10.0
    assert follower.poll() is None  # an unfinished line may be another record of step 2: hold it
    with path.open("a") as handle:
        handle.write(' "critic/lr": 3e-06}\n')
    assert follower.poll().steps == [2]  # a later step arrived
    assert follower.poll() is None
    clock[0] = 20.0
    batch = follower.poll()  # the file has settled, ending in a newline: its last step is complete
    assert batch.steps == [3] and batch.step_metrics["value"].to_list() == [3e-06]
    assert follower.released == {1, 2, 3}


def test_the_last_step_waited_for_is_complete_once_its_files_settle(tmp_path):
    """No later step comes after the run's last one and a trainer may write no _SUCCESS marker:
    the step ``--until-step`` names is complete once its files keep their sizes for ``settle``."""
    import shutil

    run = tmp_path / "run"
    last = 4
    shutil.copytree(SAMPLES / "sao-r7", run, ignore=lambda folder, names: [
        n for n in names if n.startswith("step=") and int(n.split("=")[1]) > last])
    clock = [0.0]
    waiting = RunFollower(run, settle=5.0, clock=lambda: clock[0], last_step=last)
    other = RunFollower(run, settle=5.0, clock=lambda: clock[0], last_step=last + 1)
    released = []
    while (batch := waiting.poll()) is not None:
        released += batch.steps
    while other.poll() is not None:
        pass
    assert last not in released and last not in other.released
    clock[0] = 4.0
    assert waiting.poll() is None  # not settled yet
    clock[0] = 6.0
    assert waiting.poll().steps == [last]
    assert other.poll() is None and last not in other.released  # a later step may still come


def test_timeout_ends_a_watch_that_sees_no_step(tmp_path):
    lines: list[str] = []
    ended = watch(tmp_path, default_checks(), WatchOptions(poll=0.05, timeout=0.3), echo=lines.append)
    assert (ended.exit_code, ended.reason, ended.run) == (0, "timeout", None)
    assert lines == ["stopped (timeout): no complete step seen"]


def test_a_watch_on_a_store_is_refused_with_what_to_do(samples_store_path):
    """It said "no complete step seen" of a store holding 135 complete steps of the run."""
    from cli_run import run_cli

    done = run_cli("check", samples_store_path, "--run", "sao-r6", "--watch", "--timeout", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: --watch follows a run directory a trainer is still writing; {samples_store_path} "
                           "is a store, whose runs are ingested whole: check it without --watch\n")
    # one of its runs' folders, whose packed steps the watch does not read: it checked no trajectory
    run = samples_store_path / "runs" / "sao-r6"
    done = run_cli("check", run, "--watch", "--timeout", "1")
    assert done.returncode == 2 and done.stderr.startswith(
        f"error: --watch follows a run directory a trainer is still writing; {run} is among the files of the store "
        f"{samples_store_path}, whose runs are ingested whole")


@pytest.mark.parametrize("run", ["resume-lr", "sao-r6"])
def test_watch_on_a_finished_run_directory_reads_its_scalars_as_check_does(run):
    """The scalars of a converted run sit in step_metrics/ outside step partitions: the watch
    reads them (no step without scalars) and reaches the verdicts of trajlens check."""
    lines: list[str] = []
    ended = watch(SAMPLES / run, default_checks(), WatchOptions(poll=0.01, settle=0, timeout=2), echo=lines.append)
    steps = [line for line in lines if line.startswith("step ")]
    assert steps and all(" 0 scalars" not in line for line in steps)
    checked = check_run(SAMPLES / run)
    watched = _verdicts(ended.run.results)
    expected = _verdicts(checked.results)
    if run == "resume-lr":
        assert watched == expected and ended.run.steps == checked.steps
        assert watched["learning_rate_mismatch"] == ("fail", tuple(range(41, 160)))
    else:  # the last step has no completion marker, so the watch stops before it
        assert ended.run.steps == checked.steps - 1  # the measured steps, counted as check counts them
        assert watched["critic_starved"][0] == expected["critic_starved"][0] == "fail"
        assert watched["critic_explained_variance_unwhitened"][0] == "fail"


def test_catching_up_in_batches_prints_what_a_step_at_a_time_prints(monkeypatch):
    """A watch started on a run that is already far along reads the complete steps in batches
    (measures computed once per batch) and judges each step on the steps up to it: every line,
    FIRED lines and their evidence included, is the one a watch reading step by step prints."""
    from trajlens.checks import data, watch as watch_module

    adds: list[int] = []
    add = data.RunState.add
    monkeypatch.setattr(data.RunState, "add", lambda state, batch: adds.append(len(batch.steps)) or add(state, batch))

    def watched() -> tuple[list[str], list[int]]:
        lines: list[str] = []
        adds.clear()
        watch(SAMPLES / "causal-multireward", default_checks(),
              WatchOptions(poll=0.01, settle=0, timeout=1, until_step=30), echo=lines.append)
        return lines, list(adds)

    batched, batch_sizes = watched()
    monkeypatch.setattr(watch_module, "BATCH_STEPS", 1)
    one_by_one, single_sizes = watched()
    assert max(batch_sizes) > 10 and set(single_sizes) == {1}
    assert any(line.startswith("  FIRED ") for line in batched)
    assert batched == one_by_one


def test_catching_up_a_step_at_a_time_classifies_the_calls_of_many_steps_at_once(monkeypatch):
    """Steps read one per poll while catching up are added before they are judged, so their
    tool calls are classified together (trajlens.checks.data.CLASSIFY_CALLS); the lines are
    those of classifying each step alone."""
    import trajlens.classify as classify
    from trajlens.checks import data, watch as watch_module

    classified: list[int] = []
    original, held = classify.classify_calls, data.CLASSIFY_CALLS
    monkeypatch.setattr(classify, "classify_calls",
                        lambda calls, *a, **k: classified.append(calls.height) or original(calls, *a, **k))
    monkeypatch.setattr(watch_module, "BATCH_STEPS", 1)

    def watched(calls: int) -> tuple[list[str], list[int]]:
        monkeypatch.setattr(data, "CLASSIFY_CALLS", calls)
        lines: list[str] = []
        classified.clear()
        watch(SAMPLES / "sao-r6", default_checks(), WatchOptions(poll=0.01, settle=0, timeout=1, until_step=12),
              echo=lines.append)
        return lines, list(classified)

    together, groups = watched(held)
    alone, steps = watched(1)
    assert len(steps) == 12 and len(groups) == 1 and groups == [sum(steps)]
    assert _step_lines(together) == list(range(1, 13)) and together == alone


def test_a_finished_run_whose_scalar_file_is_empty_is_still_checked_step_by_step(tmp_path):
    """A run directory's step_metrics file outside step partitions is written whole: once read,
    steps it holds no scalar for have none to come, and the watch goes on (it waited forever)."""
    import shutil

    import pyarrow.parquet as pq

    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "sao-r6", run)
    scalars = run / "step_metrics" / "part-0.parquet"
    pq.write_table(pq.read_table(scalars).slice(0, 0), scalars)
    lines: list[str] = []
    ended = watch(run, default_checks(), WatchOptions(poll=0.01, settle=0, timeout=2, until_step=20), echo=lines.append)
    assert ended.reason == "reached step 20"
    assert _step_lines(lines) == list(range(1, 21)) and all(" 0 scalars" in line for line in lines if line.startswith("step "))


@pytest.mark.parametrize("cut", [0.5, 0.0])
def test_a_damaged_step_stops_the_watch_with_the_line_check_gives(tmp_path, cut):
    """A step file without its footer while later steps were written was taken for a write in
    progress: the watch checked the later steps and passed, never reading it. Once it stays so
    for ``damage_wait`` seconds (a minute by default: a slow writer pauses less) it is refused
    with the line ``trajlens check`` gives, and no step after it is checked."""
    import shutil

    from trajlens.errors import InputError

    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "sao-r6", run)
    damaged = run / "trajectories" / "step=000003" / "part-0.parquet"
    damaged.write_bytes(damaged.read_bytes()[:int(damaged.stat().st_size * cut)])
    with pytest.raises(InputError) as unwatched:
        check_run(run)
    lines: list[str] = []
    with pytest.raises(InputError) as watched:
        watch(run, default_checks(), WatchOptions(poll=0.01, settle=0.2, timeout=60, until_step=20, damage_wait=0.5),
              echo=lines.append)
    assert str(watched.value) == str(unwatched.value) and str(damaged) in str(watched.value)
    assert _step_lines(lines) == [1, 2]



def test_a_step_of_another_run_stops_the_watch_with_the_line_check_gives(tmp_path):
    """A step file whose rows name another run (a resume that wrote another run's steps into this
    folder): check and ingest refuse it; the watch took its rows into the verdicts and passed."""
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from trajlens.errors import InputError

    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "sao-r6", run)
    other = run / "tool_calls" / "step=000004" / "part-0.parquet"
    table = pq.read_table(other)
    pq.write_table(table.set_column(table.schema.get_field_index("run_id"), "run_id",
                                    pc.binary_join_element_wise(table["run_id"], "-seed7", "")), other)
    with pytest.raises(InputError) as unwatched:
        check_run(run)
    lines: list[str] = []
    with pytest.raises(InputError) as watched:
        watch(run, default_checks(), WatchOptions(poll=0.01, settle=0, timeout=60, until_step=20), echo=lines.append)
    assert str(watched.value) == str(unwatched.value)
    assert str(watched.value) == f"{other}: record 0: field 'run_id': expected 'sao-r6', found 'sao-r6-seed7'"
    assert all(step < 4 for step in _step_lines(lines))  # no step from the other run on is judged

@pytest.mark.parametrize("line", ['{"_step": 2, "actor/entropy": {"a": 1}}', '{"_step": -7, "actor/entropy": 0.5}',
                                  '{"_step": 1, "actor/entropy": 0.5}'])
def test_a_metrics_line_check_refuses_stops_the_watch_with_its_line(tmp_path, line):
    """The watch read metrics lines by rules of its own: it skipped a value that is an object
    (and waited forever for the step it emptied), took a negative step and a second value of a
    step and metric. It reads them as ``trajlens check`` and ingest do, and stops with their line."""
    from trajlens.errors import InputError

    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.parent.mkdir()
    metrics.write_text('{"_step": 1, "actor/entropy": 0.5}\n' + line + "\n")
    with pytest.raises(InputError) as unwatched:
        check_run(metrics)
    with pytest.raises(InputError) as watched:
        watch(metrics.parent, default_checks(), WatchOptions(poll=0.01, settle=0.1, timeout=30, until_step=2))
    assert str(watched.value) == str(unwatched.value)
    assert str(watched.value).startswith(f"{metrics}: record 2: ")


def test_a_writer_pausing_mid_file_longer_than_settle_is_waited_for(tmp_path):
    """A file without its footer that stays so for longer than ``settle`` while the writer pauses
    is a write in progress, not damage: the watch waits for it (the live writer pauses 0.6 s in
    each file, the next step's folder already made)."""
    target = tmp_path / "live"
    target.mkdir()
    writer = start_writer("parquet", SAMPLES / "sao-r6", target, 112, 113, 0.6)
    lines: list[str] = []
    try:
        ended = watch(target, default_checks(), WatchOptions(poll=0.05, settle=0.2, until_step=113, timeout=300),
                      echo=lines.append)
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0, writer.stderr.read()
    assert ended.reason == "reached step 113" and _step_lines(lines) == [112, 113]


def test_a_step_and_metric_logged_in_two_metrics_files_stops_the_watch_as_ingest_refuses_it(tmp_path):
    from trajlens.errors import InputError

    run = tmp_path / "run"
    run.mkdir()
    (run / "a.jsonl").write_text('{"_step": 1, "actor/entropy": 0.5}\n')
    (run / "b.jsonl").write_text('{"_step": 1, "actor/entropy": 0.6}\n')
    with pytest.raises(InputError, match="duplicate step 1 for metric actor/entropy"):
        watch(run, default_checks(), WatchOptions(poll=0.01, settle=0.1, timeout=30, until_step=1))


def test_no_step_after_the_until_step_is_judged_the_first_one_read_included():
    lines: list[str] = []
    ended = watch(SAMPLES / "sao-r6", default_checks(), WatchOptions(poll=0.01, settle=0, timeout=1, until_step=0),
                  echo=lines.append)
    assert ended.run is None and ended.exit_code == 0  # the CLI makes it 2: nothing was checked
    assert lines == ["stopped: the run's first complete step, 1, comes after step 0"]


def _without_step_metrics(run: Path, target: Path) -> Path:
    """``run``'s tables but its step_metrics/, as a trainer that logs its scalars elsewhere writes them."""
    import shutil

    for table in ("runs", "trajectories", "tool_calls", "tokens"):
        shutil.copytree(run / table, target / table)
    return target


def test_a_run_directory_without_step_metrics_is_checked_with_its_metrics_jsonl_as_the_watch_reads_it(tmp_path):
    """No step_metrics/ at all: the metric checks have nothing to judge (a traceback before). With a
    metrics JSONL beside the tables, the layout check --watch follows, check reads that file as the
    watch does and gives the verdicts the Parquet scalars give."""
    import polars as pl
    from cli_run import run_cli

    bare = _without_step_metrics(SAMPLES / "sao-r6", tmp_path / "bare")
    done = run_cli("check", bare)
    assert done.returncode == 1 and done.stderr == "", done.stderr
    unjudged = _verdicts(check_run(bare).results)
    assert unjudged["critic_starved"][0] == "skip"

    logged = _without_step_metrics(SAMPLES / "sao-r6", tmp_path / "logged")
    scalars = pl.read_parquet(SAMPLES / "sao-r6" / "step_metrics")
    rows = scalars.pivot("name", index="step", values="value").sort("step")
    (logged / "metrics.jsonl").write_text("".join(line + "\n" for line in rows.write_ndjson().splitlines()))
    expected = _verdicts(check_run(SAMPLES / "sao-r6").results)
    assert _verdicts(check_run(logged).results) == expected
    assert expected["critic_starved"][0] == "fail"
    ended = watch(logged, default_checks(), WatchOptions(poll=0.01, settle=0, timeout=2), echo=lambda line: None)
    assert _verdicts(ended.run.results)["critic_starved"][0] == "fail"


def test_watch_given_a_metrics_file_names_the_folder_to_watch(tmp_path):
    from cli_run import run_cli

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    done = run_cli("check", tmp_path / "metrics.jsonl", "--watch", "--timeout", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: {tmp_path / 'metrics.jsonl'}: a file, not a run directory: watch the folder that "
                           f"holds it, {tmp_path}\n")


def test_a_watch_that_times_out_waiting_for_the_metrics_file_says_so(tmp_path):
    """Trajectory steps complete past the last step the metrics file holds: the watch held them back
    and ended "stopped (timeout)" without saying what it waited for."""
    import polars as pl

    run = _without_step_metrics(SAMPLES / "sao-r6", tmp_path / "run")
    rows = pl.read_parquet(SAMPLES / "sao-r6" / "step_metrics").pivot("name", index="step", values="value").sort("step")
    steps = rows["step"].to_list()
    logged = rows.filter(pl.col("step") <= steps[9])  # the trainer's scalars stopped at the tenth step
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in logged.write_ndjson().splitlines()))
    lines: list[str] = []
    ended = watch(run, default_checks(), WatchOptions(poll=0.01, settle=3600, timeout=0.5), echo=lines.append)
    # the tenth step's record may yet be followed by more of its scalars (the file has not settled)
    assert _step_lines(lines) == steps[:9]
    assert ended.reason == "timeout"
    waiting = [line for line in lines if line.startswith("waiting: ")]
    assert waiting == [f"waiting: steps {steps[9]}-{steps[-2]} are complete in the trajectories but not in the "
                       f"metrics file {run / 'metrics.jsonl'}, which is complete to step {steps[8]}"]
    assert lines[-1] == "stopped (timeout) after 9 steps"
