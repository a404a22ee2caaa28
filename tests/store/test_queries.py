"""Every saved query in queries/ documents itself and runs with only the parameters it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trajlens
from trajlens.report import report_store

QUERIES = sorted((Path(__file__).resolve().parents[2] / "queries").glob("*.sql"))
SAMPLE_PARAMS = {"run_id": "tiny", "name": "critic/vf_explained_var", "metric": "share:think", "estimator": "grpo",
                 "run_a": "tiny", "run_b": "tiny"}


def declared_parameters(text: str) -> set[str]:
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    match = re.search(r"Parameters: (.*)", header)
    assert match, "header lacks a 'Parameters:' line"
    return set() if match.group(1).startswith("none") else set(re.findall(r"\$(\w+)", match.group(1)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from tinyrun import tiny_run
    from trajlens.store.layout import RunDirWriter

    root = tmp_path_factory.mktemp("queries")
    run = tiny_run()
    with RunDirWriter(root / "run", run.runs) as writer:
        writer.write_run(run)
    trajlens.ingest([root / "run"], root / "store")
    store = trajlens.open(root / "store")
    report_store(store, root / "report", n=2)
    from trajlens.attribution import attribute

    attribute(store, "tiny")  # call_credit and class_credit for the attribution queries
    return store


@pytest.mark.parametrize("path", QUERIES, ids=[p.stem for p in QUERIES])
def test_query_is_documented_and_runs(store, path):
    text = path.read_text()
    assert text.startswith("-- "), "a query starts with a comment saying what it answers"
    used = set(re.findall(r"\$(\w+)", "\n".join(l for l in text.splitlines() if not l.startswith("--"))))
    assert used == declared_parameters(text)
    frame = store.sql(text, {name: SAMPLE_PARAMS[name] for name in used})
    assert frame.width > 0 and frame.height > 0 or "format_error" in text
