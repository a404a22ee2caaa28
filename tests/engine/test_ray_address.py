"""An address where no Ray cluster answers is refused in one line, within seconds, before Ray retries it."""

from __future__ import annotations

import socket
import time

import pytest

from cli_run import run_cli


@pytest.fixture(autouse=True)
def _ray():
    """Ray is an optional extra; importing it costs seconds, so it is asked for by the tests that
    run, not at collection (which every pytest-xdist worker does)."""
    pytest.importorskip("ray")


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_address_that_refuses_is_a_one_line_error(engine_store, tmp_path):
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    result = run_cli("advantages", engine_store, "--run", "sao-r6", "-e", "grpo", "--engine", "ray",
                     "--ray-address", address)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: --ray-address {address}: no Ray cluster there (Connection refused); start one with "
        "`ray start --head`, or name the address its head printed"]
    assert time.monotonic() - started < 60  # Ray alone retries for minutes


@pytest.mark.parametrize("form", ["{}", "ray://{}"])
def test_reachable_accepts_a_listening_head_in_either_form(form):
    from trajlens.engine.ray import reachable

    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        reachable(form.format(f"127.0.0.1:{head.getsockname()[1]}"))  # no error


def test_reachable_names_the_address_that_does_not_answer():
    from trajlens.engine.ray import reachable
    from trajlens.errors import ConfigError

    address = f"ray://127.0.0.1:{_closed_port()}"
    with pytest.raises(ConfigError, match=f"--ray-address {address}: no Ray cluster there"):
        reachable(address, timeout=2.0)
    reachable("auto")  # left to Ray, which finds the cluster started on this machine


def test_a_local_cluster_that_does_not_start_is_a_one_line_error(monkeypatch):
    """Ray's start-up timeout on a busy machine is a plain Exception with a long message."""
    import ray

    from trajlens.engine.ray import RayEngine
    from trajlens.errors import ConfigError

    def timed_out(**_: object) -> None:
        raise Exception("The current node timed out during startup. This could happen because some of the raylet "
                        "failed to startup or the GCS has become overloaded.\nmore lines of Ray's")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", timed_out)
    with pytest.raises(ConfigError) as raised:
        RayEngine()
    assert str(raised.value) == ("--engine ray: a local Ray cluster did not start: The current node timed out during "
                                 "startup. This could happen because some of the raylet failed to startup or the GCS "
                                 "has become overloaded.")
