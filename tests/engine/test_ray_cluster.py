"""``--engine ray`` on a real two-node Ray cluster started here, compared row for row with the local engine.

The cluster is two ``ray start --block`` processes (a head and a worker node, one CPU each,
a 200 MB object store, no dashboard, token authentication with a token made for the test),
each in its own process group, stopped by signalling those groups: nothing else running Ray
on the machine is touched.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import trajlens
from _tolerance import assert_frame_close_ulp
from cli_run import run_cli as run_cli_here
from engine_helpers import RUN_ID, run_cli, trajlens_env

# One cluster for the module: its tests run on one pytest-xdist worker (scripts/test: --dist loadfile).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

NODE_START_TIMEOUT_S = 150
NODE_START_ATTEMPTS = 3
STOP_TIMEOUT_S = 5
OBJECT_STORE_BYTES = 200_000_000
# A loaded machine starts Ray's agents slowly; the defaults give up after about 15 seconds.
# A node's agents must start within about 15 seconds; on a loaded machine nothing else starts
# beside them (no prestarted workers, no log monitor).
SLOW_MACHINE_SETTINGS = {"RAY_agent_register_timeout_ms": "120000", "RAY_raylet_start_wait_time_s": "120",
                         "RAY_worker_register_timeout_seconds": "120", "RAY_enable_worker_prestart": "0"}


RAY_FIXED_PORTS = frozenset({6379, 8265, 10001, 52365})
"""Ports Ray's own components take by default (GCS, dashboard, client server, dashboard agent):
a head given one of them for its GCS refuses to start."""


def _free_port() -> int:
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in RAY_FIXED_PORTS and not 10002 <= port <= 19999:  # nor Ray's worker ports
            return port


class _Node:
    """One ``ray start --block`` process, in its own process group, logging to a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
        with open(log, "w") as out:
            self.process = subprocess.Popen([ray, "start", "--block", "--disable-usage-stats", *args], env=env,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def started(self) -> bool:
        """Wait until the node is up (True) or ``ray start`` gave up (False)."""
        known_crashes = len(self._raylet_crashes())
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if "Ray runtime started" in self.log.read_text():
                return True
            if len(self._raylet_crashes()) > known_crashes:
                return False  # ray start itself would wait two more minutes before saying so
            time.sleep(1)
        return "Ray runtime started" in self.log.read_text()

    def _raylet_crashes(self) -> list[str]:
        """The fatal lines of the raylets of this machine's session directories of the cluster."""
        logs = sorted(self.log.parent.glob("session_*/logs/raylet*.out"))
        return [line for path in logs for line in path.read_text(errors="replace").splitlines() if "Check failed" in line]

    def failure(self) -> str:
        return f"{self.log.read_text()[-1500:]}\n{chr(10).join(self._raylet_crashes())[-1500:]}"

    def stop(self) -> None:
        _stop([self])


def _stop(nodes: list[_Node]) -> None:
    """Stop the nodes together: each is asked to stop (SIGTERM) and given STOP_TIMEOUT_S in all,
    then its process group is killed (the node's own processes left behind, if any)."""
    for node in nodes:
        if node.process.poll() is None:
            os.killpg(node.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for node in nodes:
        try:
            node.process.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            pass
    for node in nodes:
        try:
            os.killpg(node.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        node.process.wait(STOP_TIMEOUT_S)


def _start(args: list[str], env: dict[str, str], log: Path, nodes: list[_Node]) -> _Node:
    """Start a node, again if Ray's agents were too slow to start (a raylet gives them about 15 s)."""
    for attempt in range(NODE_START_ATTEMPTS):
        node = _Node(args, env, log.with_suffix(f".{attempt}.log"))
        nodes.append(node)
        if node.started():
            return node
        node.stop()
    pytest.fail(f"ray start did not come up in {NODE_START_ATTEMPTS} attempts: {node.failure()}")


@pytest.fixture(scope="module")
def ray_cluster():
    """The address and environment of a two-node cluster on this machine."""
    # here, not at import: importing ray.data costs seconds of every collection of the suite
    pytest.importorskip("ray.data", reason="Ray is an optional extra: pip install 'trajlens[ray]'")
    temp = Path(tempfile.mkdtemp(prefix="tl-ray-", dir="/tmp"))  # Ray's socket paths must stay short
    env = trajlens_env(RAY_DISABLE_IMPORT_WARNING="1", RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
                       RAY_AUTH_TOKEN=secrets.token_hex(32), **SLOW_MACHINE_SETTINGS)
    common = ["--num-cpus=1", f"--object-store-memory={OBJECT_STORE_BYTES}", "--include-log-monitor=false"]
    nodes: list[_Node] = []
    try:
        head = _start(["--head", f"--port={_free_port()}", "--include-dashboard=false",
                       f"--temp-dir={temp}", *common],
                      env, temp / "head.log", nodes)
        address = re.search(r"ray start --address='([^']+)'", head.log.read_text()).group(1)
        _start([f"--address={address}", *common], env, temp / "worker.log", nodes)
        yield address, env
    finally:
        _stop(nodes)
        shutil.rmtree(temp, ignore_errors=True)


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    keys = [c for c, dtype in frame.schema.items() if not isinstance(dtype, (pl.List, pl.Struct, pl.Array))]
    return frame.sort(keys, nulls_last=True)


def _assert_same_tables(local: Path, ray: Path, names: tuple[str, ...]) -> dict[str, int]:
    rows = {}
    for name in names:
        expected = trajlens.open(local).table(name).collect()
        found = trajlens.open(ray).table(name).collect()
        assert found.height == expected.height > 0, name
        assert_frame_close_ulp(_sorted(found), _sorted(expected))
        rows[name] = found.height
    return rows


def test_the_cluster_has_two_nodes(ray_cluster):
    address, env = ray_cluster
    code = "import ray; ray.init(address=%r); print(sum(n['Alive'] for n in ray.nodes()))" % address
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "2", out.stderr[-2000:]


def test_ray_engine_gives_the_local_rows(ray_cluster, store_copy, tmp_path):
    """classify, advantages and attribute through the CLI: --engine ray equals the local engine, row for row.

    Each command runs on its own copy of the store, one after the other.
    """
    address, env = ray_cluster
    on_ray = ("--engine", "ray", "--ray-address", address)
    commands = {
        # the classify store is named by URI: read through pyarrow.fs, published locally
        "classify": (("classify", "{store}"), ("call_classes", "trajectory_measures")),
        "advantages": (("advantages", "{store}", "--run", RUN_ID, "-e", "gae"), ("advantage_batches",)),
        "attribute": (("attribute", "{store}", "--run", RUN_ID, "--k", "2"), ("call_credit", "class_credit")),
    }
    seconds, rows = {}, {}
    for name, (args, tables) in commands.items():
        local = run_cli_here(*(a.format(store=store_copy) for a in args))  # the local engine, in this process
        assert local.returncode == 0, local.stderr
        copy = tmp_path / f"ray-{name}"
        shutil.copytree(store_copy, copy)
        store_argument = copy.as_uri() if name == "classify" else str(copy)
        started = time.monotonic()
        ray = run_cli(*(a.format(store=store_argument) for a in args), *on_ray, env=env, timeout=600)
        seconds[name] = round(time.monotonic() - started, 1)
        assert ray.returncode == 0, ray.stderr[-3000:]
        assert ray.stdout == local.stdout.replace(str(store_copy), str(copy))
        rows.update(_assert_same_tables(store_copy, copy, tables))
    print(f"\nray engine, seconds per command: {seconds}; rows compared: {rows}")


def test_ray_engine_carries_dynamic_gdpo_weights_from_step_to_step(ray_cluster, multireward_store, tmp_path):
    """gdpo_dynamic's moving averages cross steps: its two passes on the cluster give the local rows.

    Equal to float32 rounding rather than bit for bit: the batch whitening's float32 sums run on
    one torch thread in a one-CPU worker and on two here, so their last bits may differ (a batch
    mean of 1e-9 printed as -0.0000 on one side and 0.0000 on the other). Steps recomputed without
    the averages carried in differ far beyond the tolerance (tests/engine/test_local_engine.py
    shows that on the same small generated multireward run).
    """
    address, env = ray_cluster
    local_store, ray_store = tmp_path / "local", tmp_path / "ray"
    shutil.copytree(multireward_store, local_store)
    shutil.copytree(multireward_store, ray_store)
    run_id = trajlens.open(local_store).run_ids()[0]
    args = ("advantages", "--run", run_id, "-e", "gdpo_dynamic")
    local = run_cli_here(args[0], str(local_store), *args[1:])
    assert local.returncode == 0, local.stderr
    ray = run_cli(args[0], str(ray_store), *args[1:], "--engine", "ray", "--ray-address", address, env=env, timeout=600)
    assert ray.returncode == 0, ray.stderr[-3000:]
    expected = _sorted(trajlens.open(local_store).table("advantage_batches").collect())
    found = _sorted(trajlens.open(ray_store).table("advantage_batches").collect())
    assert found.height == expected.height > 10
    assert_frame_equal(found, expected, check_exact=False, rel_tol=1e-5, abs_tol=1e-6)
