"""TensorBoard event files as step metrics, written by the trainer's own writer."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_cli

pytest.importorskip("tensorboard")
pytest.importorskip("torch.utils.tensorboard")

import trajlens  # noqa: E402
from trajlens.errors import InputError, MissingDependencyError  # noqa: E402
from trajlens.ingest import formats  # noqa: E402
from trajlens.ingest.tensorboard import detect, load_tensorboard  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from tensorboard_fixture import expected_scalars, set_written_time, write_runs  # noqa: E402
from trl_fixture import write_trl_output  # noqa: E402
from verl_file_logger import FileLogger  # noqa: E402


def _rows(table) -> dict[tuple[int, str], float]:
    return {(row["step"], row["name"]): row["value"] for row in table.to_pylist()}


def test_scalars_written_by_the_trainer_callback_are_step_metrics(tmp_path):
    event_file = write_runs(tmp_path)
    assert detect(event_file) and detect(tmp_path / "runs")
    loaded = load_tensorboard(event_file, run_id="r")
    assert loaded.problems == []
    rows = _rows(loaded.table)
    assert rows == expected_scalars()  # the args text is not a scalar, so not a metric
    assert rows[(1, "train/rewards/format_reward/mean")] == 0.75 and rows[(2, "eval/loss")] == pytest.approx(0.02)
    assert loaded.table.column("run_id").to_pylist() == ["r"] * len(rows)
    assert loaded.table.schema.field("step").type == "int64"


def test_tensor_encoded_scalars_are_read_as_well(tmp_path):
    """Scalars as TF2's ``tf.summary.scalar`` writes them (a rank-0 tensor under the ``scalars``
    plugin, its metadata on the tag's first value only) and as ``add_scalar(new_style=True)`` does."""
    import numpy as np
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.scalar import metadata
    from tensorboard.util import tensor_util
    from torch.utils.tensorboard import SummaryWriter

    def tf2_scalar(tag, value, first):
        extra = {"metadata": metadata.create_summary_metadata(display_name=tag, description="")} if first else {}
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
            tag=tag, tensor=tensor_util.make_tensor_proto(np.float64(value)), **extra)])

    writer = SummaryWriter(log_dir=str(tmp_path / "tf2"))
    writer.file_writer.add_summary(tf2_scalar("critic/vf_explained_var", 0.123456789012, True), 7)
    writer.file_writer.add_summary(tf2_scalar("critic/vf_explained_var", 0.5, False), 8)
    writer.add_scalar("actor/lr", 2.5e-7, 7, new_style=True)
    writer.add_histogram("actor/weights", np.arange(5.0), 7)
    writer.close()
    rows = _rows(load_tensorboard(tmp_path / "tf2", run_id="r").table)
    assert rows == {(7, "critic/vf_explained_var"): 0.123456789012, (8, "critic/vf_explained_var"): 0.5,
                    (7, "actor/lr"): pytest.approx(2.5e-7, rel=1e-7)}


def test_a_resumed_run_keeps_the_later_value_of_a_step(tmp_path):
    first = set_written_time(write_runs(tmp_path, date="Nov30_12-00-00_host", steps=(1, 2)), 1_700_000_000)
    # A resume from checkpoint 1 logs step 2 again, into a new runs/<date> folder, later
    second = write_runs(tmp_path / "resumed", date="Jan01_09-00-00_host", steps=(2,))
    second = set_written_time(second, 1_700_000_500)
    shutil.move(str(second.parent), str(tmp_path / "runs" / "Jan01_09-00-00_host"))
    rows = _rows(load_tensorboard(tmp_path / "runs", run_id="r").table)
    assert rows == expected_scalars()
    # the older file named second still loses: order is by the time in the name
    assert load_tensorboard([tmp_path / "runs" / "Jan01_09-00-00_host", first.parent], run_id="r").table.num_rows \
        == len(rows)


@pytest.mark.parametrize("keep, field", [(0.5, None), (-2, "data crc")])
def test_a_truncated_event_file_is_one_line_naming_the_record(tmp_path, keep, field):
    event_file = write_runs(tmp_path)
    data = event_file.read_bytes()
    event_file.write_bytes(data[:int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(InputError) as caught:
        load_tensorboard(event_file, run_id="r")
    message = str(caught.value)
    assert message.startswith(f"{event_file}: record ") and "\n" not in message
    assert f"field '{field}'" in message if field else "field 'length" in message or "field 'data" in message
    lenient = load_tensorboard(event_file, run_id="r", strict=False)
    assert len(lenient.problems) == 1 and lenient.problems[0].record == message.split("record ")[1].split(":")[0]
    assert 0 < lenient.table.num_rows <= len(expected_scalars())
    if isinstance(keep, float):
        assert lenient.table.num_rows < len(expected_scalars())


def test_a_corrupt_record_fails_its_checksum(tmp_path):
    event_file = write_runs(tmp_path)
    data = bytearray(event_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    event_file.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"record \d+: field '(data|length) crc'.*checksum does not match"):
        load_tensorboard(event_file, run_id="r")


def test_a_nan_scalar_is_kept(tmp_path):
    """A diverging run logs a NaN loss: it is a value of that step, as in every metrics file."""
    import math

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_scalar("train/loss", 0.5, 1)
    writer.add_scalar("train/loss", float("nan"), 2)
    writer.close()
    rows = _rows(load_tensorboard(tmp_path, run_id="r").table)
    assert rows[(1, "train/loss")] == 0.5 and math.isnan(rows[(2, "train/loss")])


def test_without_the_tensorboard_package_the_error_names_the_extra(tmp_path, monkeypatch):
    event_file = write_runs(tmp_path)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'trajlens\[tensorboard\]'"):
        load_tensorboard(event_file, run_id="r")


def test_a_trl_output_folder_with_tensorboard_runs_is_one_run_in_one_call(tmp_path):
    output = write_trl_output(tmp_path / "grpo-run")
    write_runs(output)
    assert [source.format.name for source in formats.plan(output)] == ["trl"]
    done = run_cli("ingest", output, "--store", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    store = trajlens.open(tmp_path / "s")
    assert store.sql("SELECT count(DISTINCT run_id) FROM step_metrics").item() == 1
    names = dict(store.sql("SELECT name, count(*) FROM step_metrics GROUP BY 1").iter_rows())
    assert names["train/loss"] == 2 and names["eval/loss"] == 1 and names["loss"] == 2  # events and trainer state
    assert store.sql("SELECT value FROM step_metrics WHERE name = 'train/reward' AND step = 2").item() == 1.75


def test_a_runs_folder_alone_is_a_run_of_its_metrics(tmp_path):
    write_runs(tmp_path)
    planned = formats.plan(tmp_path / "runs")
    assert [source.format.name for source in planned] == ["tensorboard"]
    result = trajlens.ingest([tmp_path / "runs"], tmp_path / "s")
    store = trajlens.open(tmp_path / "s")
    assert store.sql("SELECT count(*) FROM step_metrics").item() == len(expected_scalars())
    assert result.run_ids == ["runs"]
    assert store.sql("SELECT source_format FROM runs").item() == "tensorboard"  # the loader that read it


def test_tensorboard_beside_verl_dumps_joins_the_experiment_run(tmp_path):
    dump = Path(__file__).resolve().parents[1] / "data" / "verl" / "grpo-sandbox"
    experiment = tmp_path / "exp"
    shutil.copytree(dump, experiment / "rollout_data", ignore=shutil.ignore_patterns("val"))
    shutil.copytree(dump / "val", experiment / "val_generations")
    # verl's tensorboard backend: TENSORBOARD_DIR, default tensorboard_log/<project>/<experiment>
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(experiment / "tensorboard_log" / "proj" / "exp"))
    for step in (1, 2):
        for key, value in {"critic/vf_explained_var": 0.25 * step, "actor/pg_loss": -0.5}.items():
            writer.add_scalar(key, value, step)
    writer.close()
    planned = [(s.format.name, len(s.paths)) for s in formats.plan(experiment)]
    assert planned == [("verl", 2), ("tensorboard", 1)]
    result = trajlens.ingest([experiment], tmp_path / "s")
    assert result.run_ids == ["exp"]
    store = trajlens.open(tmp_path / "s")
    assert store.sql("SELECT count(*) FROM step_metrics WHERE run_id = 'exp'").item() == 4


def test_the_cli_says_a_truncated_file_in_one_line(tmp_path):
    event_file = write_runs(tmp_path)
    event_file.write_bytes(event_file.read_bytes()[:-3])
    done = run_cli("ingest", event_file, "--store", tmp_path / "s")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert str(event_file) in done.stderr and "field 'data crc'" in done.stderr


def test_verl_file_logger_metrics_load_as_verl_writes_them(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    logger = FileLogger("proj", "exp")
    logger.log({"val-core/openai/gsm8k/acc/mean@1": np.float32(0.25)}, 0)  # validation before training
    for step in (1, 2):
        logger.log({"actor/pg_loss": np.float64(-0.1 * step), "critic/vf_explained_var": float("nan") if step == 1
                    else 0.5, "training/global_step": step, "training/epoch": 0}, step)
    logger.finish()
    path = tmp_path / "proj" / "exp.jsonl"
    assert path.read_text().splitlines()[0] == '{"step":0,"data":{"val-core/openai/gsm8k/acc/mean@1":0.25}}'
    assert [source.format.name for source in formats.plan(path)] == ["metrics"]
    from trajlens.ingest.metrics import load_metrics

    rows = _rows(load_metrics(path, run_id="r").table)
    assert rows == {(0, "val-core/openai/gsm8k/acc/mean@1"): 0.25, (1, "actor/pg_loss"): pytest.approx(-0.1),
                    (1, "training/epoch"): 0.0, (2, "actor/pg_loss"): pytest.approx(-0.2),
                    (2, "critic/vf_explained_var"): 0.5, (2, "training/epoch"): 0.0}
    # VERL_FILE_LOGGER_PATH names the file itself
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "metrics.jsonl"))
    logger = FileLogger("proj", "exp")
    logger.log({"actor/lr": 1e-6}, 3)
    logger.finish()
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {"step": 3, "data": {"actor/lr": 1e-6}}
    assert _rows(load_metrics(tmp_path / "metrics.jsonl", run_id="r").table) == {(3, "actor/lr"): 1e-6}


def test_the_shipped_event_file_is_what_the_callback_writes():
    from tensorboard_fixture import SHIPPED

    (event_file,) = (SHIPPED / "runs").glob("*/events.out.tfevents.*")
    assert _rows(load_tensorboard(SHIPPED / "runs", run_id="r").table) == expected_scalars()
    assert [source.format.name for source in formats.plan(event_file)] == ["tensorboard"]


def test_the_shipped_file_logger_metrics_are_what_verl_writes(tmp_path):
    from verl_file_logger import write_shipped

    shipped = Path(__file__).resolve().parents[1] / "data" / "verl" / "file_logger.jsonl"
    assert Path(write_shipped(str(tmp_path / "m.jsonl"))).read_bytes() == shipped.read_bytes()


def test_without_the_package_the_cli_says_which_extra_in_one_line(tmp_path):
    event_file = write_runs(tmp_path)
    code = ("import sys; sys.modules['tensorboard'] = None; from trajlens.cli._app import run; "
            f"sys.argv = ['trajlens', 'ingest', {str(event_file)!r}, '--store', {str(tmp_path / 's')!r}]; run()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "pip install 'trajlens[tensorboard]'" in done.stderr


def test_a_trl_folder_without_the_package_keeps_the_trainer_state_and_says_what_it_left(tmp_path, monkeypatch):
    from trajlens.ingest.trl import load_trl

    output = write_trl_output(tmp_path / "grpo-run")
    write_runs(output)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    run = load_trl(output)
    names = set(run.step_metrics.column("name").to_pylist())
    assert "loss" in names and not any(name.startswith("train/") for name in names)
    assert any("trajlens[tensorboard]" in problem.message for problem in run.problems)


def test_checks_read_an_event_folder_directly():
    from tensorboard_fixture import SHIPPED

    from trajlens.checks import check_run, parse_checks

    checks = parse_checks({"checks": {"reward_floor": {"measure": "metric:train/reward", "condition": "threshold",
                                                       "below": 1.5}}}, "test")
    (result,) = check_run(SHIPPED / "runs", checks).results
    assert result.status == "fail" and result.fired_steps == (1,)
