"""A stand-in trainer for the --watch tests: writes a run directory step by step, never atomically.

    python live_writer.py parquet SRC DST FIRST LAST PAUSE   # canonical step partitions
    python live_writer.py metrics SRC DST LAST PAUSE          # config.json, then metrics.jsonl line by line
    python live_writer.py verl SRC DST LAST PAUSE             # N.jsonl dumps, line by line

Every file is written in two halves with a pause between, so a reader can see it half-written;
a line of JSONL is likewise written in two parts. The Parquet writer creates the next step's
partition while the current step's last file is half-written.
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq


def write_slowly(path: Path, data: bytes, pause: float, halfway=None) -> None:
    """Write ``data`` in two halves, calling ``halfway()`` while the file is half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    half = len(data) // 2
    with path.open("wb") as handle:
        handle.write(data[:half])
        handle.flush()
        if halfway is not None:
            halfway()
        time.sleep(pause)
        handle.write(data[half:])


def parquet_bytes(table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def parquet(src: Path, dst: Path, first: int, last: int, pause: float) -> None:
    write_slowly(dst / "runs" / "part-0.parquet", (src / "runs" / "part-0.parquet").read_bytes(), pause)
    metrics = pq.read_table(src / "step_metrics" / "part-0.parquet")
    for step in range(first, last + 1):
        partition = f"step={step:06d}"
        for table in ("trajectories", "tool_calls", "tokens"):
            for file in sorted((src / table / partition).glob("*.parquet")):
                write_slowly(dst / table / partition / file.name, file.read_bytes(), pause)
        rows = metrics.filter(pc.equal(metrics.column("step"), step))
        # The next step's partition appears while this step's scalars are still half-written: a
        # reader that took "a later step exists" alone as completeness would read a broken file.
        following = dst / "trajectories" / f"step={step + 1:06d}"
        write_slowly(dst / "step_metrics" / partition / "part-0.parquet", parquet_bytes(rows), pause,
                     halfway=(lambda: following.mkdir(parents=True)) if step < last else None)
    (dst / "trajectories" / f"step={last:06d}" / "_SUCCESS").touch()


def append_line(handle, line: str, pause: float) -> None:
    half = len(line) // 2
    handle.write(line[:half])
    handle.flush()
    time.sleep(pause)
    handle.write(line[half:] + "\n")
    handle.flush()


def metrics(src: Path, dst: Path, last: int, pause: float) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    lines = (src / "metrics.jsonl").read_text().splitlines()[:last]
    with (dst / "metrics.jsonl").open("w") as handle:
        for line in lines:
            append_line(handle, line, pause)


def verl(src: Path, dst: Path, last: int, pause: float) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    template = (src / "2.jsonl").read_text().splitlines()
    for step in range(1, last + 1):
        with (dst / f"{step}.jsonl").open("w") as handle:
            for line in template:
                record = json.loads(line)
                record["step"] = step
                append_line(handle, json.dumps(record), pause)


if __name__ == "__main__":
    mode, source, target, *numbers = sys.argv[1:]
    values = [float(n) if "." in n else int(n) for n in numbers]
    {"parquet": parquet, "metrics": metrics, "verl": verl}[mode](Path(source), Path(target), *values)
