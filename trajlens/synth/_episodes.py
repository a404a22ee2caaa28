"""The tool-call sequence of every trajectory of a step, rendered into table columns.

A trajectory's non-think calls are drawn as class counts (suite runs by the suite rate, the
rest from the class weights), ordered the way an agent works (search and read, reproduce, edit
and check, run the suite) with noise, then think calls are inserted in runs, and the submission
closes it. A run script is written by an edit before it is first run; a read-back is a read of
the file the edit just before it changed. Token counts per call are drawn for the whole step at
once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trajlens.synth import commands as cmd
from trajlens.synth._outcomes import Outcomes
from trajlens.synth._params import (
    CALL_TOKENS, EMPTY_THINK_TOKENS, REASONING_TOKENS, REST_CLASSES, TOKEN_SIGMA, StepParams,
)
from trajlens.synth.commands import CALL_CLASSES, CLASS_INDEX, Harness
from trajlens.synth.tasks import TaskPool

# Codes beyond the ten classes, for calls whose rendering differs within a class.
CREATE = len(CALL_CLASSES)  # edit: writes the run script
READBACK = CREATE + 1  # view: reads the file just edited
EMPTY_THINK = CREATE + 2  # think with an empty or filler thought
SHELL = CREATE + 3  # search: the lone call of an empty shell

CODE_CLASS: tuple[str, ...] = CALL_CLASSES + (cmd.EDIT, cmd.VIEW, cmd.THINK, cmd.SEARCH)
"""Behaviour class of every code."""
CODE_CLASS_INDEX = np.array([CLASS_INDEX[c] for c in CODE_CLASS])

_REST = np.array([CLASS_INDEX[c] for c in REST_CLASSES])
_ORDER = np.zeros(len(CODE_CLASS))
for _klass, _key in {cmd.SEARCH: 0.0, cmd.VIEW: 0.6, cmd.RUN_SCRIPT: 1.4, cmd.OTHER: 1.7, cmd.QUICK_CHECK: 2.2,
                     cmd.EDIT: 2.5, cmd.TEST_TARGETED: 2.9, cmd.TEST_SUITE: 3.4}.items():
    _ORDER[CLASS_INDEX[_klass]] = _key
_ORDER_NOISE = 0.9

_MODEL_MEDIAN = np.array([CALL_TOKENS[c][0] for c in CALL_CLASSES] + [120.0, 30.0, EMPTY_THINK_TOKENS, 20.0])
_OBS_MEDIAN = np.array([CALL_TOKENS[c][1] for c in CALL_CLASSES] + [10.0, 300.0, CALL_TOKENS[cmd.THINK][1], 30.0])
_NO_REASONING = np.isin(np.arange(len(CODE_CLASS)), [CLASS_INDEX[cmd.THINK], EMPTY_THINK])


@dataclass
class StepCalls:
    """The calls of one step, flat over trajectories (``calls_per_trajectory`` splits them)."""

    calls_per_trajectory: np.ndarray
    codes: np.ndarray
    tool_name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    command: list[str | None] = field(default_factory=list)
    observation: list[str] = field(default_factory=list)
    return_code: list[int | None] = field(default_factory=list)
    model_tokens: np.ndarray | None = None
    observation_tokens: np.ndarray | None = None
    reasoning_tokens: np.ndarray | None = None
    readbacks: np.ndarray | None = None
    """Read-backs per trajectory."""
    edits: np.ndarray | None = None
    """Edits per trajectory (read-back rate = readbacks / edits)."""

    @property
    def classes(self) -> np.ndarray:
        """Index into :data:`CALL_CLASSES` of every call."""
        return CODE_CLASS_INDEX[self.codes]


def step_calls(out: Outcomes, params: StepParams, pool: TaskPool, harness: Harness, scale: float,
               rng: np.random.Generator) -> StepCalls:
    sequences, readbacks, edits = _sequences(out, params, rng)
    calls = StepCalls(np.array([len(s) for s in sequences], dtype=np.int64),
                      np.concatenate(sequences) if sequences else np.zeros(0, np.int64))
    calls.readbacks, calls.edits = readbacks, edits
    _render(calls, sequences, out, pool, harness, rng)
    _token_counts(calls, params, scale, rng)
    return calls


def _sequences(out: Outcomes, params: StepParams, rng: np.random.Generator):
    batch = out.calls.size
    submitted = out.submitted.astype(np.int64)
    useful = out.calls - out.think
    others = np.maximum(useful - submitted, 0)
    suite = (rng.random(batch) < params.suite_rate) * (1 + rng.poisson(params.suite_repeats, batch))
    suite = np.minimum(suite, others)
    counts = rng.multinomial(others - suite, params.weights)
    # a premature submission only looks around before submitting
    view, search = REST_CLASSES.index(cmd.VIEW), REST_CLASSES.index(cmd.SEARCH)
    counts[out.premature] = 0
    counts[out.premature, view] = others[out.premature] // 2
    counts[out.premature, search] = others[out.premature] - others[out.premature] // 2
    suite = np.where(out.premature, 0, suite)
    edit_column = REST_CLASSES.index(cmd.EDIT)
    readbacks = np.minimum(rng.binomial(counts[:, edit_column], params.readback), counts[:, view])
    edits = counts[:, edit_column].copy()

    suite_code, think_code = CLASS_INDEX[cmd.TEST_SUITE], CLASS_INDEX[cmd.THINK]
    edit_code, script_code, view_code = CLASS_INDEX[cmd.EDIT], CLASS_INDEX[cmd.RUN_SCRIPT], CLASS_INDEX[cmd.VIEW]
    sequences = []
    for i in range(batch):
        if out.shell[i]:
            sequences.append(np.array([SHELL]))
            continue
        codes = np.concatenate([np.repeat(_REST, counts[i]), np.full(suite[i], suite_code)])
        codes = codes[np.argsort(_ORDER[codes] + rng.normal(0.0, _ORDER_NOISE, codes.size), kind="stable")]
        seq = list(codes)
        if script_code in seq and edit_code in seq:
            seq.remove(edit_code)  # that edit becomes the one writing the script
            seq.insert(seq.index(script_code), CREATE)
            edits[i] -= 1
        if readbacks[i]:
            seq, readbacks[i] = _insert_readbacks(seq, int(readbacks[i]), rng, edit_code, view_code)
        if out.think[i]:
            seq = _insert_think_runs(seq, int(out.think[i]), params, rng, think_code)
        if submitted[i]:
            seq.append(CLASS_INDEX[cmd.SUBMIT])
        sequences.append(np.array(seq, dtype=np.int64))
    return sequences, readbacks, edits


def _insert_readbacks(seq: list[int], count: int, rng, edit_code: int, view_code: int) -> tuple[list[int], int]:
    """Move ``count`` views (the latest ones) to just after randomly chosen edits, as read-backs."""
    edits = [j for j, c in enumerate(seq) if c == edit_code]
    count = min(count, len(edits))
    chosen = {edits[j] for j in rng.choice(len(edits), size=count, replace=False).tolist()}
    drop = set([j for j, c in enumerate(seq) if c == view_code][::-1][:count])
    out: list[int] = []
    for j, code in enumerate(seq):
        if j in drop:
            continue
        out.append(code)
        if j in chosen:
            out.append(READBACK)
    return out, count


def _insert_think_runs(seq: list[int], count: int, params: StepParams, rng, think_code: int) -> list[int]:
    runs = []
    while sum(runs) < count:
        runs.append(int(rng.geometric(1.0 / params.think_run)))
    runs[-1] -= sum(runs) - count
    slots = rng.integers(0, len(seq) + 1, size=len(runs))
    empty = rng.random(count) < params.empty_think
    codes = iter(np.where(empty, EMPTY_THINK, think_code).tolist())
    for slot, length in sorted(zip(slots.tolist(), runs), reverse=True):
        seq[slot:slot] = [next(codes) for _ in range(length)]
    return seq


def _render(calls: StepCalls, sequences, out: Outcomes, pool: TaskPool, harness: Harness, rng) -> None:
    randoms = rng.integers(0, 2**31 - 1, size=calls.codes.size + 2 * len(sequences))
    k = 0
    for i, seq in enumerate(sequences):
        t = out.task[i]
        ctx = cmd.context(int(pool.repo[t]), int(pool.module[t]), int(pool.symbol[t]), int(pool.tests[t]),
                          bool(out.resolved[i]), int(randoms[k]))
        k += 1
        for code in seq.tolist():
            r = int(randoms[k])
            k += 1
            if code == CREATE:
                call = cmd.create_script(ctx, harness, r)
            elif code == READBACK:
                call = cmd.readback(ctx, harness, r)
            elif code == EMPTY_THINK:
                call = cmd.render(cmd.THINK, ctx, harness, r, empty_thought=True)
            elif code == SHELL:
                call = cmd.sandbox_lost(r)
            else:
                call = cmd.render(CALL_CLASSES[code], ctx, harness, r)
            calls.tool_name.append(call.tool_name)
            calls.arguments.append(call.arguments)
            calls.command.append(call.command)
            calls.observation.append(call.observation)
            calls.return_code.append(call.return_code)
        k += 1


def _token_counts(calls: StepCalls, params: StepParams, scale: float, rng) -> None:
    codes = calls.codes
    n = codes.size
    size = scale * params.call_tokens
    action = rng.lognormal(np.log(_MODEL_MEDIAN[codes] * size), TOKEN_SIGMA, n)
    reasoning = rng.lognormal(np.log(REASONING_TOKENS * params.reasoning * scale), TOKEN_SIGMA, n)
    reasoning = np.where(_NO_REASONING[codes], 0.0, reasoning)
    observation = rng.lognormal(np.log(_OBS_MEDIAN[codes] * size), TOKEN_SIGMA, n)
    reasoning = np.rint(reasoning).astype(np.int64)
    model = np.maximum(np.rint(action).astype(np.int64), 1) + reasoning
    observation = np.maximum(np.rint(observation).astype(np.int64), 1)
    last = np.cumsum(calls.calls_per_trajectory) - 1
    observation[last[calls.calls_per_trajectory > 0]] = 0  # the episode ends on the model's last token
    calls.model_tokens, calls.observation_tokens, calls.reasoning_tokens = model, observation, reasoning
