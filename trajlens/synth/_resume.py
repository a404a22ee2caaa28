"""The ``resume-lr`` scenario: training scalars of a run whose resume doubled the critic LR.

History, as the seed tells it (with steps chosen to give its 119 affected steps):

1. Steps 1-40 run with critic LR 5e-6; a checkpoint is saved at step 40.
2. The config's critic LR is changed to 2.5e-6 and the run resumes from that checkpoint. verl
   restores the LR scheduler with the optimizer, so steps 41-159 still run (and log) 5e-6.
3. At step 160 the run resumes again with ``checkpoint.load_contents=[model,optimizer]``; the
   fresh scheduler follows the config and steps 160-200 log 2.5e-6.

Written: ``metrics.jsonl`` (wandb-style, one record per step with ``_step``), ``config.json``
(the config as it stood at each resume), a run directory whose ``step_metrics`` holds the same
scalars (no trajectories), and ``truth.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from trajlens.ingest.config_history import CONFIG_FILE
from trajlens.schema import SCHEMAS
from trajlens.store.layout import RunDirWriter
from trajlens.synth.spec import Scenario
from trajlens.synth.truth import TruthRecorder

METRICS_FILE = "metrics.jsonl"
UPDATE_NORM = 0.0041  # critic weight-update norm per step at the configured LR (arbitrary units)


def generate_resume(spec: Scenario, directory: Path, seed: int):
    from trajlens.synth.generate import GENERATOR_VERSION, SynthResult, _curves, _header, run_id, step_rng

    resume = spec.resume
    rid = run_id(spec.name, seed)
    history = _config_history(spec)
    current = history[-1]["config"]
    truth = TruthRecorder(_header(spec, seed, rid))
    records = []
    update_noise = _unit_mean_noise(spec, seed)
    for step in range(1, spec.steps + 1):
        rng = step_rng(seed, spec.name, step)
        configured = _configured_lr(spec, step)
        logged = resume.checkpoint_lr if step < resume.fixed_step else resume.configured_lr
        factor = resume.weight_delta_ratio if logged != resume.configured_lr else 1.0
        record = {
            "_step": step,
            "_runtime": round(95.0 * step + float(rng.normal(0, 3)), 2),
            "actor/lr": resume.actor_lr,
            "critic/lr": logged,
            "critic/grad_norm": round(float(spec.critic.grad_norm.value(step) * rng.lognormal(0, spec.critic.grad_norm_spread)), 4),
            "critic/update_norm": round(float(UPDATE_NORM * factor * update_noise[step - 1]), 7),
            "critic/vf_explained_var": round(float(spec.critic.explained_variance.value(step) + rng.normal(0, 0.05)), 4),
            "actor/grad_norm": round(float(spec.training.actor_grad_norm.value(step) * rng.lognormal(0, 0.3)), 4),
        }
        records.append(record)
        truth.add(step, {"critic_lr_configured": configured, "critic_lr_logged": logged,
                         "lr_ratio": logged / configured, "update_norm_factor": factor})
    runs = pa.Table.from_pylist([{
        "run_id": rid, "name": spec.title, "estimator": spec.estimator,
        "config": json.dumps(current, sort_keys=True), "source_format": "synth",
        "source": f"trajlens.synth:{spec.name}?seed={seed}",
    }], schema=SCHEMAS["runs"])
    run_dir = directory
    with RunDirWriter(run_dir, runs) as writer:
        rows = [{"run_id": rid, "step": r["_step"], "name": k, "value": float(v)}
                for r in records for k, v in r.items() if not k.startswith("_")]
        writer.write_step("step_metrics", pa.Table.from_pylist(rows, schema=SCHEMAS["step_metrics"]))
    metrics = run_dir / METRICS_FILE
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    config = run_dir / CONFIG_FILE
    config.write_text(json.dumps({"configured": current, "history": history}, indent=1) + "\n")
    affected = [s for s in range(resume.resume_step, min(resume.fixed_step, spec.steps + 1))]
    truth.summary = {
        "doubled_lr_steps": [affected[0], affected[-1]] if affected else [],
        "doubled_lr_step_count": len(affected),
        "configured_critic_lr": resume.configured_lr,
        "logged_critic_lr_when_doubled": resume.checkpoint_lr,
        "weight_delta_ratio": resume.weight_delta_ratio,
        "generator_version": GENERATOR_VERSION,
    }
    events = [{"kind": "lr_override_on_resume", "steps": affected, "value": resume.checkpoint_lr / resume.configured_lr,
               "doc": "the resumed LR scheduler state overrode the configured critic LR"}]
    path = truth.write(run_dir, _curves(spec), events)
    return SynthResult(spec.name, rid, run_dir, path, spec.steps, 0, 0, 0, (metrics, config))


def _unit_mean_noise(spec: Scenario, seed: int) -> np.ndarray:
    """Log-normal noise (sigma 0.04) with mean exactly 1 within each LR period, so the update-norm
    ratio between periods is exactly the scenario's ``weight_delta_ratio``."""
    from trajlens.synth.generate import step_rng

    noise = step_rng(seed, spec.name, 0).lognormal(0.0, 0.04, spec.steps)
    steps = np.arange(1, spec.steps + 1)
    for period in (steps < spec.resume.fixed_step, steps >= spec.resume.fixed_step):
        if period.any():
            noise[period] /= noise[period].mean()
    return noise


def _configured_lr(spec: Scenario, step: int) -> float:
    resume = spec.resume
    return resume.checkpoint_lr if step < resume.resume_step else resume.configured_lr


def _config_history(spec: Scenario) -> list[dict]:
    resume = spec.resume

    def cfg(critic_lr: float, trainer: dict) -> dict:
        return {
            "algorithm": {"adv_estimator": "gae", "gamma": 1.0, "lam": 1.0, "whiten_advantages": True},
            "actor_rollout_ref": {"actor": {"optim": {"lr": resume.actor_lr}}},
            "critic": {"optim": {"lr": critic_lr}, "grad_clip": spec.critic.grad_clip},
            "trainer": {"total_training_steps": spec.steps, "save_freq": 40, **trainer},
        }

    checkpoint = f"checkpoints/global_step_{resume.resume_step - 1}"
    return [
        {"from_step": 1, "config": cfg(resume.checkpoint_lr, {"resume_mode": "disable"})},
        {"from_step": resume.resume_step,
         "config": cfg(resume.configured_lr, {"resume_mode": "resume_path", "resume_from_path": checkpoint})},
        {"from_step": resume.fixed_step,
         "config": cfg(resume.configured_lr, {"resume_mode": "resume_path",
                                               "resume_from_path": f"checkpoints/global_step_{resume.fixed_step - 1}",
                                               "checkpoint": {"load_contents": ["model", "optimizer"]}})},
    ]
