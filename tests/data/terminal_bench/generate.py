"""Write the Terminal-Bench fixture: a ``tb run`` folder of two trials, built by hand.

terminal-bench 0.2.18 needs Python 3.12, Docker and a model to run a trial, so the files are
written here the way its harness writes them:

* ``<run>/<task_id>/<trial_name>/results.json``: ``TrialResults.model_dump_json(indent=4)``
  (``terminal_bench/harness/harness.py``, ``_execute_single_trial``; fields from
  ``terminal_bench/harness/models.py``);
* ``commands.txt`` beside it: ``f"{repr(keys)}\\n"`` for every ``send_keys``
  (``terminal_bench/terminal/tmux_session.py``), the agent's keys then the harness's test run
  ``['bash ', '/tests/run-tests.sh', 'Enter']`` (``harness.py`` ``_run_tests``);
* ``<run>/results.json`` and ``run_metadata.json``: the run's aggregate, which the loader skips.

    python tests/data/terminal_bench/generate.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = HERE / "runs" / "2026-01-01__00-00-00"

TRIALS = [
    ("hello-world", "hello-world.1-of-1.2026-01-01__00-00-00", True, "none", {"test_hello_file_exists": "passed"},
     [["ls -la", "Enter"], "cat > hello.txt << 'EOF'\nHello, world!\nEOF\n", ["cat hello.txt", "Enter"]]),
    ("fix-permissions", "fix-permissions.1-of-1.2026-01-01__00-00-00", False, "agent_timeout",
     {"test_script_runs": "failed", "test_mode": "passed"},
     [["ls -l process_data.sh", "Enter"], ["chmod +x process_data.sh", "Enter"], ["C-c"],
      ["./process_data.sh", "Enter"]]),
]


def main() -> None:
    results = []
    for task, trial, resolved, failure, tests, keys in TRIALS:
        folder = RUN / task / trial
        folder.mkdir(parents=True, exist_ok=True)
        result = {
            "id": f"00000000-0000-4000-8000-00000000000{len(results)}",
            "trial_name": trial, "task_id": task, "instruction": f"Solve {task}.", "is_resolved": resolved,
            "failure_mode": failure, "parser_results": tests, "recording_path": f"{task}/{trial}/sessions/agent.cast",
            "total_input_tokens": 1200 + len(results), "total_output_tokens": 80 + len(results),
            "trial_started_at": "2026-01-01T00:00:00+00:00", "trial_ended_at": "2026-01-01T00:01:00+00:00",
            "agent_started_at": "2026-01-01T00:00:05+00:00", "agent_ended_at": "2026-01-01T00:00:50+00:00",
            "test_started_at": "2026-01-01T00:00:51+00:00", "test_ended_at": "2026-01-01T00:00:59+00:00",
        }
        (folder / "results.json").write_text(json.dumps(result, indent=4))
        sent = [*keys, ["bash ", "/tests/run-tests.sh", "Enter"]]
        (folder / "commands.txt").write_text("".join(f"{repr(k)}\n" for k in sent))
        results.append(result)
    (RUN / "results.json").write_text(json.dumps({
        "id": "00000000-0000-4000-8000-000000000009", "results": results, "pass_at_k": {}, "n_resolved": 1,
        "n_unresolved": 1, "resolved_ids": ["hello-world"], "unresolved_ids": ["fix-permissions"], "accuracy": 0.5,
    }, indent=4))
    (RUN / "run_metadata.json").write_text(json.dumps({"run_id": RUN.name, "dataset_name": "terminal-bench-core",
                                                       "agent_name": "terminus", "model_name": "mock"}, indent=4))


if __name__ == "__main__":
    main()
