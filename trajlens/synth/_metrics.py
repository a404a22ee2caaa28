"""Per-step training scalars, named as verl logs them.

Scalars that the written data determines (``critic/vf_explained_var``, ``num_turns/mean``,
``response_length/mean``, ``critic/score/mean``, ``critic/advantages/mean``) are computed from
it; the others (grad norms, LR, entropy, validation) are drawn from the scenario's curves.
"""

from __future__ import annotations

import numpy as np

from trajlens.synth.spec import Scenario

FAT_TAIL = (30.0, 70.0)  # the seed's occasional critic grad norms at LR 5e-6
ALARM = 30.0  # the seed's alarm level: never three steps in a row above it


class MetricSource:
    """Draws the scalars of successive steps; keeps the state one step needs from the last."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._recent_critic: list[float] = []

    def step(self, step: int, computed: dict[str, float], rng: np.random.Generator) -> dict[str, float]:
        s = self.scenario
        out = dict(computed)
        if s.training is not None:
            t = s.training
            out["actor/lr"] = t.actor_lr * (min(1.0, step / t.warmup_steps) if t.warmup_steps else 1.0)
            out["actor/grad_norm"] = float(t.actor_grad_norm.value(step) * rng.lognormal(0.0, 0.3))
            out["actor/entropy"] = float(t.entropy.value(step) + rng.normal(0.0, 0.01))
        if s.critic is not None:
            c = s.critic
            out["critic/grad_norm"] = self._critic_grad_norm(step, rng)
            out["critic/grad_clip"] = c.grad_clip
            out["critic/lr"] = c.lr
        if s.outcome is not None and s.outcome.val_score is not None and step % s.outcome.val_every == 0:
            out["val/score"] = self._val(step, rng)
        return out

    def _critic_grad_norm(self, step: int, rng: np.random.Generator) -> float:
        c = self.scenario.critic
        spikes = {s: e.value for e in self.scenario.events if e.kind == "grad_norm_spike" for s in e.steps}
        if step in spikes:
            value = float(spikes[step])
        else:
            value = self._draw(c, step, rng)
            if len(self._recent_critic) >= 2 and min(self._recent_critic[-2:]) > ALARM and value > ALARM and c.grad_norm_tail:
                while value > ALARM:  # the seed: never three consecutive steps above 30
                    value = float(c.grad_norm.value(step) * rng.lognormal(0.0, c.grad_norm_spread))
        self._recent_critic.append(value)
        return value

    @staticmethod
    def _draw(c, step: int, rng: np.random.Generator) -> float:
        if c.grad_norm_tail and rng.random() < c.grad_norm_tail:
            return float(rng.uniform(*FAT_TAIL))
        value = c.grad_norm.value(step) * rng.lognormal(0.0, c.grad_norm_spread)
        low, high = c.grad_norm_range
        return float(np.clip(value, low, high))

    def _val(self, step: int, rng: np.random.Generator) -> float:
        curve = self.scenario.outcome.val_score
        anchors = {int(s) for s, _ in curve.anchors}
        noise = 0.0 if step in anchors else rng.normal(0.0, 0.002)
        return round(curve.value(step) + noise, 4)
