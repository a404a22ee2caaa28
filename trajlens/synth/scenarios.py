"""The scenarios: the seed runs, with their numbers, as data.

These scenarios are descriptive, not causal: behaviour follows injected curves, so a link
between a run's advantages and its drift is drawn, not caused. The causal scenarios, whose
drift emerges from the estimator, are in :mod:`trajlens.synth.causal_spec`.

Each curve's ``origin`` says whether its anchors are the seed's numbers (``/work/shared/seeds``,
digested in DIGEST.md) or values the generator had to choose where the seed is silent; the
README of each sample run repeats that split. Steps are absolute: a shorter run simply stops
before later anchors and events.
"""

from __future__ import annotations

from trajlens.synth.commands import Harness
from trajlens.synth.curves import Curve, flat
from trajlens.synth.spec import (
    Behaviour, Critic, Event, Outcome, ResumeLR, RewardChannels, Scenario, Training,
)

SAO_HARNESS = Harness("sao-swe", editor=True, think=True, submit_tool=True)
MINI_HARNESS = Harness("mini-swe-agent", editor=False, think=False, submit_tool=False)


def _weights(**curves: Curve) -> tuple[tuple[str, Curve], ...]:
    return tuple(curves.items())


_BASE_MIX = _weights(
    test_targeted=flat(2.5, "chosen"), quick_check=flat(3.0, "chosen"), run_script=flat(1.2, "chosen"),
    edit=flat(5.0, "chosen"), view=flat(9.0, "chosen"), search=flat(7.0, "chosen"), other=flat(0.8, "chosen"),
)

SAO_R6 = Scenario(
    name="sao-r6",
    title="SAO r6: single-rollout GAE with a starved critic, collapsing into think calls",
    summary=(
        "One rollout per prompt, per-token GAE (gamma 1, lambda 1) without advantage whitening, and a "
        "critic starved by a grad clip of 1.0 while its grad norm runs 7-68: explained variance stays "
        "0-0.3. The think tool, a reward-neutral no-op, spreads from 6-8% of tool calls to 73% at step "
        "130, in runs of consecutive (mostly empty) think calls; turns rise while useful actions thin "
        "out. Steps 119-121 are three consecutive batches whose unwhitened advantages are all negative."
    ),
    findings=(
        "think share per step (classifier): 0.06-0.08 at steps 5-50, 0.17-0.18 at 80-100, 0.29 at 115, 0.73 at 130",
        "all-negative batches at steps 119, 120, 121 (and no other streak) when GAE is recomputed without whitening",
        "critic/vf_explained_var between 0 and 0.3 at every step; critic/grad_norm 7-68 against critic/grad_clip 1.0",
        "val/score flat at 0.62-0.66 from step 20 to 120",
        "num_turns/mean rising and the share of edits, tests and checks per turn falling as think runs lengthen",
    ),
    steps=135,
    batch=10,
    tokens_per_trajectory=1200,
    tool_calls_per_trajectory=36,
    max_calls=90,
    estimator="gae",
    harness=SAO_HARNESS,
    behaviour=Behaviour(
        think_share=Curve(((0, 0.07), (5, 0.07), (50, 0.075), (80, 0.17), (100, 0.18), (115, 0.29), (121, 0.36),
                           (130, 0.73), (135, 0.75)), "seed",
                          "share of all tool calls that are think calls; anchors 0, 121 and 135 chosen"),
        useful_calls=Curve(((0, 1.0), (100, 0.95), (130, 0.8)), "chosen"),
        think_run=Curve(((0, 1.1), (80, 1.4), (115, 2.0), (130, 4.5)), "chosen"),
        empty_think=Curve(((0, 0.25), (80, 0.5), (115, 0.7), (130, 0.95)), "chosen"),
        suite_rate=Curve(((0, 0.7), (115, 0.6), (130, 0.35)), "chosen"),
        class_weights=_BASE_MIX,
    ),
    outcome=Outcome(
        pass_rate=Curve(((0, 0.34), (60, 0.37), (115, 0.35), (121, 0.3), (130, 0.15), (135, 0.12)), "chosen"),
        val_score=Curve(((10, 0.612), (20, 0.628), (30, 0.640), (40, 0.652), (50, 0.637), (60, 0.646), (70, 0.659),
                         (80, 0.641), (90, 0.633), (100, 0.648), (110, 0.656), (120, 0.631), (130, 0.580)), "seed",
                        "the seed gives 0.62-0.66 for steps 20-120; the values inside that band and the drop at 130 are chosen"),
        val_every=10,
    ),
    critic=Critic(
        explained_variance=Curve(((0, 0.02), (10, 0.10), (25, 0.22), (40, 0.12), (55, 0.26), (70, 0.15), (85, 0.28),
                                  (100, 0.18), (110, 0.24), (120, 0.08), (130, 0.05), (135, 0.04)), "seed",
                                 "within the seed's 0-0.3; the wandering is chosen"),
        bias=Curve(((0, 0.18), (15, -0.15), (30, 0.10), (45, -0.20), (60, 0.17), (75, -0.10), (90, 0.22),
                    (105, -0.18), (115, 0.05), (125, -0.10), (135, 0.10)), "seed",
                   "the seed's unwhitened batch advantage mean drifting by +/-0.25; the path is chosen"),
        grad_norm=flat(20.0, "chosen", "median; the seed gives the range 7-68"),
        grad_norm_range=(7.0, 68.0),
        grad_norm_spread=0.55,
        grad_clip=1.0,
        lr=5e-6,
        value_noise=0.05,
        whiten=False,
    ),
    training=Training(actor_lr=1e-6, actor_grad_norm=flat(0.12, "chosen"),
                      entropy=Curve(((0, 0.52), (115, 0.45), (130, 0.30)), "chosen")),
    events=(
        Event("all_negative_batch", (119, 120, 121), doc=(
            "a batch of hard tasks that none resolves, and a critic that values every model token above the "
            "trajectory's return: every unwhitened GAE advantage of the batch is negative")),
    ),
)

SAO_R7 = Scenario(
    name="sao-r7",
    title="SAO r7: the fix, with whitening on and a healthy critic; verification changes form",
    summary=(
        "The r7 restart: advantage whitening on, critic grad clip 10, critic PPO epochs 2. The critic "
        "learns (explained variance 0.2-0.5, best 0.64; grad norm median 9-10), the think share stays "
        "at 6-8% throughout, and turns stay at 50-60 per trajectory. Behaviour changes as density: more "
        "edits and more python -c / heredoc checks per turn, while the share of trajectories that run "
        "the whole test suite falls to about 0.47 in the last quarter."
    ),
    findings=(
        "think share 0.06-0.08 at every step; the 0.15 monitor line never crossed",
        "test-suite run rate (trajectories with a suite run) falling from about 0.8 to about 0.47 over steps 150-200",
        "quick checks and edits per trajectory rising at flat turns (num_turns/mean 50-60)",
        "critic/vf_explained_var 0.2-0.5 with a best of 0.64; critic/grad_norm median 9-10 under clip 10",
        "one critic/grad_norm of 233 at step 143, a batch of empty shells (sandbox pods lost); never 3 steps in a row above 30",
        "val/score 0.640 at step 20, 0.666 at 100, 0.662-0.670 over 100-160, 0.682 at 180",
    ),
    steps=200,
    batch=5,
    tokens_per_trajectory=900,
    tool_calls_per_trajectory=55,
    max_calls=90,
    estimator="gae",
    harness=SAO_HARNESS,
    behaviour=Behaviour(
        think_share=flat(0.07, "seed", "0.06-0.08 all run"),
        turn_spread=0.12,
        response_length=flat(1.0, "seed", "response length flat (about 60k tokens in the seed)"),
        think_run=flat(1.1, "chosen"),
        empty_think=flat(0.2, "chosen"),
        suite_rate=Curve(((0, 0.82), (50, 0.76), (100, 0.66), (150, 0.48), (200, 0.46)), "seed",
                         "the seed gives 0.468 for the last quarter; the earlier path is chosen"),
        class_weights=_weights(
            test_targeted=Curve(((0, 3.0), (200, 2.5)), "chosen"),
            quick_check=Curve(((0, 3.0), (200, 8.0)), "chosen", "python -c and heredoc checks per trajectory rise"),
            run_script=Curve(((0, 1.5), (200, 1.0)), "chosen"),
            edit=Curve(((0, 5.0), (200, 8.0)), "chosen"),
            view=Curve(((0, 12.0), (200, 9.0)), "chosen"),
            search=Curve(((0, 8.0), (200, 5.5)), "chosen"),
            other=flat(1.0, "chosen"),
        ),
    ),
    outcome=Outcome(
        pass_rate=Curve(((0, 0.36), (100, 0.42), (200, 0.45)), "chosen"),
        val_score=Curve(((20, 0.640), (40, 0.651), (60, 0.657), (80, 0.661), (100, 0.666), (120, 0.663), (140, 0.670),
                         (160, 0.665), (180, 0.682), (200, 0.679)), "seed",
                        "0.640@20, 0.666@100, 0.662-0.670 plateau, 0.682@180 from the seed; the rest chosen"),
        val_every=20,
    ),
    critic=Critic(
        explained_variance=Curve(((0, 0.20), (20, 0.28), (50, 0.35), (80, 0.42), (110, 0.38), (125, 0.45), (130, 0.64),
                                  (135, 0.46), (160, 0.48), (200, 0.44)), "seed",
                                 "0.2-0.5 with a best of 0.64 (the seed); the path is chosen"),
        bias=Curve(((0, 0.04), (60, -0.03), (120, 0.02), (200, -0.02)), "chosen"),
        grad_norm=flat(9.5, "seed", "median 9-10"),
        grad_norm_spread=0.35,
        grad_norm_tail=0.04,
        grad_clip=10.0,
        lr=5e-6,
        value_noise=0.15,
        whiten=True,
        ppo_epochs=2,
    ),
    training=Training(actor_lr=1e-6, actor_grad_norm=flat(0.35, "seed", "0.2-0.5 under whitening")),
    events=(
        Event("grad_norm_spike", (143,), 233.0,
              "sandbox pods vanished: a quarter of the batch are empty shells (one call, no result), critic grad norm 233"),
    ),
    config_extra=(
        (("actor_rollout_ref", "rollout", "is_threshold"), [0.2, 4.0]),
        (("monitor",), {"think_share_alarm": 0.15}),
    ),
)

GRPO_LEG = Scenario(
    name="grpo-leg",
    title="GRPO leg: the same agent under group-relative advantages, growing longer",
    summary=(
        "The GRPO comparison run of the seed: groups of 8 rollouts per prompt and no critic. Turns and "
        "response length grow, reasoning tokens per call rise by 30%, and the read-back rate (an edit "
        "followed at once by a read of the edited file) and the test-suite run rate rise."
    ),
    findings=(
        "num_turns/mean and response_length/mean rising over the run",
        "reasoning_tokens per trajectory about 1.3x higher at the end than at the start, per call",
        "read-back rate rising from about 0.15 to 0.5 (an edit read back at once; the classifier's "
        "readback_share also counts coincidental reads within three calls); test-suite run rate from 0.5 to 0.75",
        "group-relative advantages (groups of 8) sum to zero in every group",
    ),
    steps=80,
    batch=16,
    group_size=8,
    tokens_per_trajectory=1000,
    tool_calls_per_trajectory=30,
    max_calls=90,
    estimator="grpo",
    harness=SAO_HARNESS,
    behaviour=Behaviour(
        think_share=flat(0.07, "chosen"),
        useful_calls=Curve(((0, 1.0), (80, 1.5)), "seed", "turns grow (the size of the growth is chosen)"),
        call_tokens=Curve(((0, 1.0), (80, 1.1)), "chosen"),
        reasoning=Curve(((0, 1.0), (80, 1.3)), "seed", "chain of thought +30%"),
        readback=Curve(((0, 0.15), (80, 0.5)), "seed", "read-back rises (the values are chosen)"),
        suite_rate=Curve(((0, 0.5), (80, 0.75)), "seed", "suite run rate rises (the values are chosen)"),
        class_weights=_BASE_MIX,
    ),
    outcome=Outcome(
        pass_rate=Curve(((0, 0.30), (80, 0.42)), "chosen"),
        val_score=Curve(((10, 0.60), (80, 0.64)), "chosen"),
        val_every=10,
    ),
    training=Training(actor_lr=1e-6, actor_grad_norm=flat(0.25, "chosen")),
)

MULTIREWARD = Scenario(
    name="multireward",
    title="Two reward channels under GRPO: format saturates, the summed advantage degenerates",
    summary=(
        "Groups of 8 with two reward channels: format (binary: a well-formed submission) and "
        "correctness (0-1: share of the task's target tests that pass). The trainer sums the channels "
        "(weights 1, 1) before normalising. Format is learned by step 200 and its in-group spread "
        "vanishes (rel_gain 0.9 -> 0.05) while correctness keeps a rel_gain near 0.5."
    ),
    findings=(
        "format rel_gain falling from about 0.9 to about 0.05 after step 200; correctness rel_gain about 0.5 throughout",
        "the advantage statistics of the seed that do and do not reproduce, normalisation by normalisation (below)",
    ),
    steps=320,
    batch=48,
    group_size=8,
    tokens_per_trajectory=200,
    tool_calls_per_trajectory=3,
    max_calls=9,
    estimator="grpo",
    harness=MINI_HARNESS,
    behaviour=Behaviour(
        think_share=flat(0.0, "chosen"),
        suite_rate=flat(0.4, "chosen"),
        class_weights=_BASE_MIX,
        premature_submit=Curve(((0, 0.0), (250, 0.0), (300, 0.015), (320, 0.02)), "chosen",
                               "the seed's 'format right, answer wrong' samples: a submission after two or three calls"),
    ),
    outcome=Outcome(pass_rate=flat(0.0, "chosen", "unused: correctness comes from the reward channels"),
                    partial_credit=0.0, timeout_rate=0.0, val_score=None),
    training=Training(actor_lr=5e-6, actor_grad_norm=flat(0.3, "chosen"), warmup_steps=100,
                      entropy=Curve(((0, 0.6), (200, 0.42), (320, 0.33)), "seed", "slowly falling")),
    rewards=RewardChannels(
        format_rate=Curve(((0, 0.75), (100, 0.93), (200, 0.9936), (320, 0.9936)), "seed",
                          "chosen so that format rel_gain = 1 - p^8 - (1-p)^8 runs 0.9 -> 0.05 as in the seed"),
        correctness_spread=Curve(((0, 0.12), (200, 0.17), (320, 0.17)), "chosen",
                                 "chosen so that correctness rel_gain sits near the seed's 0.5 once format saturates"),
        correctness_level=Curve(((0, -0.2), (320, 0.4)), "chosen"),
    ),
)

RESUME_LR = Scenario(
    name="resume-lr",
    title="A resume that silently doubled the critic LR",
    summary=(
        "Training scalars only. The config's critic LR was changed from 5e-6 to 2.5e-6 before resuming "
        "from the step-40 checkpoint; the resume restored the LR scheduler from the checkpoint, so "
        "steps 41-159 (119 steps) ran and logged critic/lr 5e-6, double the configured value. At step "
        "160 the run was resumed again loading only model and optimizer state, and the LR follows the "
        "config. The ratio of critic weight-update norms before and after is 1.954."
    ),
    findings=(
        "critic/lr logged 5e-06 at steps 41-159 while the config (runs.config and config.json) says 2.5e-06",
        "the logged/configured ratio is exactly 2.0 over those 119 steps and 1.0 elsewhere",
        "critic/update_norm about 1.954x higher at steps 41-159 than at 160-200",
    ),
    steps=200,
    batch=0,
    estimator="gae",
    training=Training(actor_lr=1e-6, actor_grad_norm=flat(0.35, "chosen")),
    critic=Critic(explained_variance=Curve(((0, 0.2), (200, 0.45)), "chosen"), bias=flat(0.0, "chosen"),
                  grad_norm=flat(9.5, "seed"), grad_clip=10.0, lr=2.5e-6, grad_norm_spread=0.35, whiten=True),
    resume=ResumeLR(configured_lr=2.5e-6, checkpoint_lr=5e-6, actor_lr=1e-6, resume_step=41, fixed_step=160,
                    weight_delta_ratio=1.954),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (SAO_R6, SAO_R7, GRPO_LEG, MULTIREWARD, RESUME_LR)}
"""Every scenario by name."""
