"""The types of the estimator registry: what an entry says, and what a run's data holds.

:class:`EstimatorSpec` is one estimator as data; :class:`RunFacts` is what a run offers; the
entries themselves live in :mod:`trajlens.estimators.registry`. No torch here.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from trajlens.limits import FLOAT32_MAX, FLOAT32_NUMBER, float32_finite, float32_number

KEY_COLUMNS: tuple[str, ...] = ("run_id", "step", "trajectory_id", "group_id")

AggregationMode = Literal[
    "token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "dr-grpo",
    "luspo",
]
AGGREGATION_MODES: tuple[str, ...] = get_args(AggregationMode)
"""The loss aggregation modes (:mod:`trajlens.estimators.aggregation`), here without torch: the
command line's help lists them."""
"""The columns that key a trajectory in every recomputed frame, in the order they come."""


class Input(enum.Flag):
    """What an estimator reads from a run, beyond trajectory keys."""

    NONE = 0
    TOKEN_ARRAYS = enum.auto()
    """A ``response_mask`` per trajectory (the ``tokens`` table)."""
    CRITIC_VALUES = enum.auto()
    """Critic ``values`` per token."""
    TOKEN_COUNTS = enum.auto()
    """Each trajectory's model-token count (``tokens`` or the ``model_tokens`` column)."""
    GROUPS = enum.auto()
    """Groups (same prompt, same step) with two or more members somewhere in the run."""
    FULL_GROUPS = enum.auto()
    """Every group has two or more members."""
    REWARDS = enum.auto()
    """A scalar ``reward`` on every trajectory."""
    CHANNELS = enum.auto()
    """Two or more named reward channels (``reward_channels``)."""
    FULL_CHANNELS = enum.auto()
    """Every reward channel of the run, with a value, on every trajectory."""
    LOG_PROBS = enum.auto()
    """Behaviour ``log_probs`` per token."""
    SUM_PI_SQUARED = enum.auto()
    """Per-token sum of squared vocabulary probabilities, a ``sum_pi_squared`` list column of
    ``tokens`` (verl ``actor.calculate_sum_pi_squared``); not part of the trajlens schema."""
    BASELINE_REWARDS = enum.auto()
    """The greedy baseline response's reward, a ``reward_baseline`` column of ``trajectories``
    (verl ReMax ``reward_baselines``); not part of the trajlens schema."""


class Statistics(enum.Enum):
    """Over what an estimator's per-step batch statistics are taken, as its loss sees them."""

    MODEL_TOKENS = "model tokens"
    """Every model token counts once: token-level advantages, or a whitening over tokens."""
    TRAJECTORIES = "trajectories"
    """Every trajectory counts once: one advantage per trajectory, normalised per trajectory."""


class Kind(enum.Enum):
    """How :func:`~trajlens.estimators.adapters` feeds the tensor function."""

    TOKEN = "token"
    """Token arrays in, (B, T) advantages out."""
    OUTCOME = "outcome"
    """One score per trajectory and its group in, one advantage per trajectory out."""
    CHANNEL = "channel"
    """One value per trajectory and reward channel in, one advantage per trajectory out."""


class InReport(enum.Enum):
    """Whether the report recomputes an estimator on a run that allows it."""

    ALWAYS = "always"
    WHEN_DECLARED = "when the run's config declares it"
    NEVER = "never"


@dataclass(frozen=True)
class Option:
    """One option of an estimator, as ``recompute(..., name=value)`` or ``--option name=value``."""

    name: str
    type: str
    """``bool``, ``int``, ``float``, ``str``, ``list``, ``list|dict`` or ``config``."""
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    """The values a ``str`` option accepts (empty: any)."""
    items: str | None = None
    """What each entry of a ``list`` or ``list|dict`` option must be: ``"name"`` (distinct
    non-empty texts: channel names) or ``"weight"`` (finite numbers the estimators' float32
    holds: channel weights)."""

    def problem(self, estimator: str, value: Any) -> str | None:
        """Why ``value`` is no good for this option, or None."""
        kinds: dict[str, Callable[[Any], bool]] = {
            "bool": lambda v: isinstance(v, bool),
            "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "str": lambda v: isinstance(v, str),
            "list": lambda v: isinstance(v, (list, tuple)),
            "list|dict": lambda v: isinstance(v, (list, tuple, dict)),
            "config": lambda v: isinstance(v, dict) or type(v).__name__ == "DynamicWeightConfig",
        }
        if value is None and self.default is None:
            return None
        if not kinds[self.type](value):
            expected = "a table of DynamicWeightConfig fields" if self.type == "config" else self.type
            return f"{estimator} option {self.name!r}: expected {expected}, found {value!r}"
        if self.type == "float" and value is not None and not float32_number(value):
            return f"{estimator} option {self.name!r}: expected {FLOAT32_NUMBER}, found {value!r}"
        if self.choices and value not in self.choices:
            return f"{estimator} option {self.name!r}: expected one of {', '.join(self.choices)}, found {value!r}"
        if self.items is not None and value is not None:
            return self._item_problem(estimator, value)
        return None

    def _item_problem(self, estimator: str, value: Any) -> str | None:
        """Why an entry of a list (or a dict's value) is no good for this option, or None."""
        entries = list(value.values()) if isinstance(value, dict) else list(value)
        where = f"{estimator} option {self.name!r}"
        if self.items == "name":
            bad = [entry for entry in entries if not isinstance(entry, str) or not entry]
            if bad:
                return f"{where}: expected channel names, found {bad[0]!r}"
            if len(set(entries)) != len(entries):
                return f"{where}: expected distinct channel names, found {value!r} (a channel named twice)"
        if self.items == "weight":
            bad = [entry for entry in entries if not float32_finite(entry)]
            if bad:
                return f"{where}: expected finite numbers of at most {FLOAT32_MAX:.4g} in size, found {bad[0]!r}"
        return None




TRAINERS: Mapping[str, str] = {"verl": "verl", "trl": "TRL"}
"""The trainers whose releases the registry's conventions name -> how their name is written."""

COMPARED_RELEASES: Mapping[str, tuple[str, ...]] = {"verl": ("0.8.0", "0.9.0", "0.9.1"), "trl": ("1.5.0", "1.6.0", "1.16.0")}
"""The releases whose code the estimators were read from and compared with (``scripts/reference_check``)."""

CURRENT_RELEASES: Mapping[str, str] = {"verl": "0.9.1", "trl": "1.16.0"}
"""The newest release of each trainer the estimators were compared with: what ``--trainer verl``
(no version) means, and the release a run is taken to come from when nothing says otherwise."""


def _version(text: str) -> tuple[int, ...]:
    parts = text.strip().split(".")
    # ASCII digits only (str.isdigit takes Arabic-Indic and other scripts' digits), a few per part
    if not text.strip() or not all(part.isascii() and part.isdigit() and len(part) <= 9 for part in parts):
        raise ValueError(f"expected a release such as 0.9.0, found {text[:40]!r}{'...' if len(text) > 40 else ''}")
    return tuple(int(part) for part in parts)


@dataclass(frozen=True)
class TrainerRelease:
    """One release of a trainer, such as ``verl==0.8.0`` (what ``--trainer`` reads)."""

    trainer: str
    """A key of :data:`TRAINERS`."""
    version: tuple[int, ...]
    """The release as numbers; ``(0, 8)`` stands for every 0.8.x."""

    def __str__(self) -> str:
        return f"{self.trainer}=={'.'.join(map(str, self.version))}"


def parse_trainer(text: str) -> TrainerRelease:
    """``verl==0.8.0``, ``trl==1.5`` or a bare ``verl`` / ``trl`` (its :data:`CURRENT_RELEASES`)
    as a :class:`TrainerRelease`; anything else is a one-line :class:`ValueError`."""
    name, sep, version = text.strip().partition("==")
    name = name.strip().lower()
    if name not in TRAINERS:
        raise ValueError(f"trainer must be one of {', '.join(TRAINERS)} (as verl==0.9.0 or trl==1.6), found {text!r}")
    return TrainerRelease(name, _version(version if sep else CURRENT_RELEASES[name]))


def uncompared(release: TrainerRelease) -> str | None:
    """What to say of a release outside the range of :data:`COMPARED_RELEASES` (None inside it):
    its conventions are those of the nearest release compared, which it may not share."""
    compared = [_version(v) for v in COMPARED_RELEASES[release.trainer]]
    name = TRAINERS[release.trainer]
    version = release.version
    if version[:len(compared[-1])] > compared[-1]:
        nearest, side = compared[-1], "newer than the newest"
    elif version + (0,) * (len(compared[0]) - len(version)) < compared[0]:
        nearest, side = compared[0], "older than the oldest"
    else:
        return None
    shown = ".".join(map(str, nearest))
    return (f"{name} {'.'.join(map(str, version))} is {side} {name} release compared ({shown}): "
            f"computed as {shown} computes, which it may not")


@dataclass(frozen=True)
class Releases:
    """A range of one trainer's releases whose behaviour a convention reproduces.

    Bounds are inclusive and compared at their own precision: ``last="0.8"`` holds 0.8.0 and
    every 0.8.x. No bound on a side: every release on that side that was compared."""

    trainer: str
    first: str = ""
    last: str = ""

    def holds(self, release: TrainerRelease) -> bool:
        """Whether ``release`` is in the range."""
        if release.trainer != self.trainer:
            return False
        version = release.version
        if self.first:
            first = _version(self.first)
            if version + (0,) * (len(first) - len(version)) < first:
                return False
        if self.last:
            last = _version(self.last)
            if version[:len(last)] > last:
                return False
        return True

    def __str__(self) -> str:
        name = TRAINERS[self.trainer]
        if self.first and self.last:
            return f"{name} {self.first}-{self.last}"
        if self.first:
            return f"{name} >= {self.first}"
        if self.last:
            return f"{name} <= {self.last}"
        return name


def recomputation_label(estimator: str, options: Mapping[str, Any], release: "TrainerRelease | None" = None) -> str:
    """A recomputation's label spelled out: the estimator's name, then ``release`` and each option
    (``grpo@trl==1.5+epsilon=1000``); :func:`trajlens.estimators.registry.saved_label` decides
    when a label needs more than the name."""
    label = estimator if release is None else f"{estimator}@{release}"
    for name, value in _flat_options(options):
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", "="))
        # a label is one word, and `:` separates it from the statistic in `advantage:LABEL:STAT`
        label += f"+{name}=" + "".join(text.split()).replace(":", "_")
    return label


def _flat_options(options: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(name, value)`` of each option, a table's fields as ``name.field``, sorted by name."""
    flat: list[tuple[str, Any]] = []
    for name, value in sorted(options.items()):
        if isinstance(value, Mapping):
            flat.extend(_flat_options(value, f"{prefix}{name}."))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            flat.extend(_flat_options(dataclasses.asdict(value), f"{prefix}{name}."))
        else:
            flat.append((f"{prefix}{name}", value))
    return flat


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot name an estimator choice (a column value, ``RUN:LABEL`` of
    ``trajlens compare``, a line of a table): empty, or holding a blank or a control character;
    None when it can."""
    if not label:
        return "expected a name, found an empty one"
    if any(c.isspace() or not c.isprintable() for c in label):
        return f"expected a name without blanks or control characters, found {label!r}"
    if ":" in label:
        return f"expected a name without ':', which separates it in advantage:LABEL:STAT and RUN:LABEL, found {label!r}"
    return None


@dataclass(frozen=True)
class EstimatorChoice:
    """An estimator under a label, with options: a report variant, a trainer's convention, a
    recomputation attribution compares, a check's advantage label, what a run trained with."""

    label: str
    """Name in every output (``estimator`` column, ``advantage:<label>:<stat>``)."""
    estimator: str
    """Name in :data:`trajlens.estimators.registry.ESTIMATOR_REGISTRY`."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword options of :func:`trajlens.estimators.adapters` (the registry's defaults otherwise)."""
    doc: str = ""
    """What it is; for a trainer's convention, in the trainer's terms, starting with its release
    range where it has one (``TRL >= 1.6 GRPO, scale_rewards=group, eps 1e-4``)."""
    releases: tuple[Releases, ...] = ()
    """For a trainer's convention: the release ranges whose behaviour it reproduces (what
    ``--trainer`` picks it by); empty when no trainer release computes it so."""

    def for_release(self, release: TrainerRelease) -> bool:
        """Whether this convention is what ``release`` computes."""
        return any(releases.holds(release) for releases in self.releases)

    def spec(self) -> EstimatorSpec:
        """The registry entry of :attr:`estimator` (a one-line error for an unknown name)."""
        from trajlens.estimators.registry import estimator_spec

        return estimator_spec(self.estimator)

    def settings(self) -> dict[str, Any]:
        """Every option as the recomputation uses it: the registry's defaults, then ``options``."""
        return self.spec().settings(self.options)

    def missing(self, facts: RunFacts) -> list[str]:
        """What the run lacks for this estimator with these settings (the registry entry's
        inputs); empty when it applies."""
        return self.spec().missing(facts, self.settings())

    def in_report(self, facts: RunFacts) -> bool:
        """Whether the report recomputes this choice on a run with ``facts``."""
        return self.spec().in_report(facts, self.settings())

    def computes_as(self, other: EstimatorChoice | None) -> bool:
        """Whether ``other`` recomputes the same advantages: the same estimator and settings."""
        return other is not None and other.estimator == self.estimator and other.settings() == self.settings()

    def among(self, choices: Iterable[EstimatorChoice]) -> EstimatorChoice | None:
        """Of ``choices``, the one that computes as this one, preferring one of the same label."""
        same = [choice for choice in choices if self.computes_as(choice)]
        return next((c for c in same if c.label == self.label), same[0] if same else None)

    @property
    def needs(self) -> str:
        """The input class in one word, from the registry: ``values`` (critic values),
        ``channels_with_lengths``, ``channels``, ``tokens`` or ``groups``."""
        inputs = self.spec().inputs
        if Input.CRITIC_VALUES in inputs:
            return "values"
        if Input.CHANNELS in inputs:
            return "channels_with_lengths" if Input.TOKEN_COUNTS in inputs else "channels"
        return "tokens" if inputs & (Input.TOKEN_ARRAYS | Input.TOKEN_COUNTS) else "groups"


@dataclass(frozen=True)
class Declaration:
    """Config values that, all together, say a run trained with an estimator under one of its labels."""

    when: tuple[tuple[str, str], ...]
    """(dotted config key, value) pairs; a value matches the key's value as lower-case text."""
    label: str
    """A label of the entry's :meth:`EstimatorSpec.choices`."""
    rank: int | None = None
    """Which of several declarations that hold at once wins: the higher rank (default: the
    number of pairs, so the more specific declaration wins)."""

    @property
    def weight(self) -> int:
        return self.rank if self.rank is not None else len(self.when)


@dataclass(frozen=True)
class FlatScan:
    """When an estimator is a masked scan on flat token buffers (the run layer's step kernels,
    :mod:`trajlens.run.step_advantages`), whitened over the step's model tokens where asked."""

    critic: bool
    """True: the critic's values and the ``lam`` option; False: a zero critic and lambda 1."""
    when: tuple[tuple[str, Any], ...] = ()
    """Option values (of :meth:`EstimatorChoice.settings`) the scan needs."""
    reset: bool = False
    """verl <= 0.8's returns (no critic): the running sum reset after every token outside the
    mask, rather than carried across observation tokens."""
    whitened: bool = False
    """Always whitened (REINFORCE++), rather than as the ``whiten`` option says."""
    compared_by_default: bool = True
    """Whether attribution compares it on every run with token arrays; else only on runs that
    declare it (as token estimators without a flat scan)."""

    def applies(self, settings: Mapping[str, Any]) -> bool:
        return all(settings.get(name) == value for name, value in self.when)


@dataclass(frozen=True)
class RunFacts:
    """What a run's training data holds, as :meth:`EstimatorSpec.applies` needs it."""

    trajectories: int = 0
    token_arrays: bool = False
    """Every training trajectory has a row in ``tokens`` with a model token."""
    token_gap: str = ""
    """The first trajectory without token arrays, and why (``trajectory '1-0' has no model
    token``, ``... has no row in tokens``); empty when every trajectory has them."""
    critic_values: bool = False
    """Some token row carries critic values."""
    token_counts: bool = False
    """Every trajectory has a model-token count (token arrays or ``model_tokens``)."""
    largest_group: int = 0
    smallest_group: int = 0
    all_rewarded: bool = False
    any_rewarded: bool = False
    """Some trajectory has a reward: under TRL's conventions one without is unscorable, but a run
    without any has nothing to estimate."""
    channels: int = 0
    channel_gap: str = ""
    """Where a trajectory lacks a reward channel of the run (``trajectory '3-a-1' lacks channel
    'format'``); empty when every trajectory has a value of every channel."""
    log_probs: bool = False
    sum_pi_squared: bool = False
    baseline_rewards: bool = False
    declared: frozenset[str] = frozenset()
    """Registry names the run's logged config declares (see :func:`declared_estimators`)."""


UNSCORED_CONVENTIONS: tuple[str, ...] = ("trl", "trl-1.5")
"""Values of an estimator's ``convention`` option under which a trajectory without a reward is
scored as TRL's trainers score an unscorable completion: left out of the statistics with
advantage 0 (trl >= 1.6), or a reward of 0 (trl <= 1.5)."""

GROUPS_OF_TWO = "groups of two or more"
"""What :meth:`EstimatorSpec.missing` says a run of groups of one lacks for a group estimator
(:attr:`Input.GROUPS`); recomputing it anyway gives each trajectory its group-of-one advantage."""

OUTSIDE_SCHEMA = Input.SUM_PI_SQUARED | Input.BASELINE_REWARDS
"""Inputs no store holds (the trajlens schema has no column for them): an estimator that reads
one is recomputed in Python on frames that carry it (:func:`trajlens.recompute`), never from a
store."""

# Input -> (is it there?, what to say when it is not), read by EstimatorSpec.missing
_INPUT_CHECKS: tuple[tuple[Input, Callable[[RunFacts], bool], str], ...] = (
    (Input.TOKEN_ARRAYS, lambda f: f.token_arrays, "token arrays for every trajectory"),
    (Input.CRITIC_VALUES, lambda f: f.critic_values, "critic values"),
    (Input.TOKEN_COUNTS, lambda f: f.token_counts, "a model-token count for every trajectory"),
    (Input.GROUPS, lambda f: f.largest_group > 1, GROUPS_OF_TWO),
    (Input.FULL_GROUPS, lambda f: f.smallest_group > 1, "two or more trajectories in every group"),
    (Input.REWARDS, lambda f: f.all_rewarded, "a reward for every trajectory"),
    (Input.CHANNELS, lambda f: f.channels > 1, "two or more reward channels"),
    (Input.FULL_CHANNELS, lambda f: not f.channel_gap, "every reward channel on every trajectory"),
    (Input.LOG_PROBS, lambda f: f.log_probs, "behaviour log-probs per token"),
    (Input.SUM_PI_SQUARED, lambda f: f.sum_pi_squared, "per-token sum_pi_squared (not in the trajlens schema)"),
    (Input.BASELINE_REWARDS, lambda f: f.baseline_rewards, "the greedy baseline's reward (column reward_baseline, not in the trajlens schema)"),
)


@dataclass(frozen=True)
class EstimatorSpec:
    """One advantage estimator: what it is, what it needs, its options and its reference."""

    name: str
    summary: str
    """One line: what the estimator computes."""
    function: str
    """The tensor function, as ``"module:attribute"``."""
    kind: Kind
    inputs: Input
    options: tuple[Option, ...]
    reference: str
    """The code it reproduces (function and file)."""
    reference_version: str
    """The release or commit of that code that was read."""
    statistics: Statistics
    report: InReport = InReport.ALWAYS
    adapter: str = ""
    """How :func:`~trajlens.estimators.adapters` builds its inputs: a name of
    ``trajlens.estimators.adapters.ADAPTERS`` (default: the kind's own, ``outcome`` or ``channel``)."""
    stateful: bool = False
    """Whether it carries state from one step to the next (``recompute(..., carry=...)``)."""
    flat_scans: tuple[FlatScan, ...] = ()
    """When it runs as a masked scan on flat token buffers: the first that applies to its settings."""
    report_variants: tuple[EstimatorChoice, ...] = ()
    """Labels and options the report recomputes it under; one variant named after it by default."""
    conventions: tuple[EstimatorChoice, ...] = ()
    """How trainers compute it, each with options and the trainer's own description (what
    :func:`~trajlens.estimators.identify_advantages` tries)."""
    declared_by: tuple[Declaration, ...] = ()
    """Config values that say a run trained with it (read by :func:`~trajlens.estimators.trained_with`)."""
    config_options: tuple[tuple[str, str], ...] = ()
    """(option, dotted config key): where a trainer's config sets an option (verl's
    ``algorithm.gamma``); :func:`~trajlens.estimators.trained_with` gives the run's own estimator
    the value its config logged."""

    def __post_init__(self) -> None:
        for choice in (*self.report_variants, *self.conventions):
            if choice.estimator != self.name:
                raise ValueError(f"estimator {self.name}: choice {choice.label!r} names estimator {choice.estimator!r}")
        labels = {choice.label for choice in self.choices()}
        for declaration in self.declared_by:
            if declaration.label not in labels:
                raise ValueError(f"estimator {self.name}: declaration {declaration.when} names no label "
                                 f"{declaration.label!r} (labels: {', '.join(sorted(labels))})")
        known = {option.name for option in self.options}
        for option, key in self.config_options:
            if option not in known:
                raise ValueError(f"estimator {self.name}: config key {key!r} sets no option {option!r}")

    @property
    def from_store(self) -> bool:
        """Whether a store can hold what it reads: False when it needs an input of
        :data:`OUTSIDE_SCHEMA`."""
        return not self.inputs & OUTSIDE_SCHEMA

    def tensor_function(self) -> Callable[..., Any]:
        """The tensor function itself (imports torch)."""
        module, attribute = self.function.split(":")
        return cast(Callable[..., Any], getattr(importlib.import_module(module), attribute))

    def defaults(self) -> dict[str, Any]:
        """Option name -> default."""
        return {option.name: option.default for option in self.options}

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options an estimator runs with: its defaults, then ``options`` (checked by
        :meth:`option_problems`), each ``float`` option as a Python float (an integer of any
        size would reach torch as an int64)."""
        kinds = {option.name: option.type for option in self.options}
        merged = {**self.defaults(), **options}
        return {name: float(value) if kinds.get(name) == "float" and isinstance(value, int) and not isinstance(value, bool)
                else value for name, value in merged.items()}

    def option_problems(self, options: Mapping[str, Any]) -> list[str]:
        """Every unknown option name and every value of the wrong kind."""
        known = {option.name: option for option in self.options}
        problems = []
        for name, value in options.items():
            option = known.get(name)
            if option is None:
                problems.append(f"{self.name} takes no option {name!r} (options: {', '.join(sorted(known)) or 'none'})")
                continue
            problem = option.problem(self.name, value)
            if problem:
                problems.append(problem)
        return problems

    def missing(self, facts: RunFacts, settings: Mapping[str, Any] | None = None) -> list[str]:
        """What the run lacks for this estimator under ``settings`` (its options; the defaults
        when None); empty when it applies. Under TRL's conventions (:data:`UNSCORED_CONVENTIONS`)
        a trajectory without a reward is TRL's unscorable completion, so the run need not reward
        every trajectory."""
        settings = self.defaults() if settings is None else settings
        needed = self.inputs
        unscored = settings.get("convention") in UNSCORED_CONVENTIONS
        if unscored:
            needed &= ~Input.REWARDS
        gaps = {Input.FULL_CHANNELS: facts.channel_gap, Input.TOKEN_ARRAYS: facts.token_gap}
        missing = [what + (f" ({gaps[flag]})" if gaps.get(flag) else "")
                   for flag, present, what in _INPUT_CHECKS if flag in needed and not present(facts)]
        if unscored and Input.REWARDS in self.inputs and facts.trajectories and not (facts.any_rewarded or facts.all_rewarded):
            missing.append("a reward for some trajectory (every one is unscorable: nothing to estimate)")
        return missing

    def applies(self, facts: RunFacts, settings: Mapping[str, Any] | None = None) -> bool:
        """Whether the run's data allows this estimator (under ``settings``, see :meth:`missing`)."""
        return not self.missing(facts, settings)

    def channel_gap_note(self, facts: RunFacts) -> str | None:
        """One line saying this estimator is not computed because a trajectory lacks a reward
        channel others have, when that alone keeps it off the run; None otherwise."""
        missing = self.missing(facts)
        if Input.FULL_CHANNELS not in self.inputs or not facts.channel_gap or len(missing) != 1:
            return None
        return f"{self.name}: not computed ({facts.channel_gap}; it needs every reward channel on every trajectory)"

    def in_report(self, facts: RunFacts, settings: Mapping[str, Any] | None = None) -> bool:
        """Whether the report recomputes this estimator (under ``settings``) on a run with ``facts``."""
        if self.report is InReport.NEVER or not self.applies(facts, settings):
            return False
        return self.report is InReport.ALWAYS or self.name in facts.declared

    def variants(self) -> tuple[EstimatorChoice, ...]:
        """The labels and options the report recomputes it under."""
        return self.report_variants or (EstimatorChoice(self.name, self.name, {}, self.summary),)

    def choices(self) -> tuple[EstimatorChoice, ...]:
        """Its report variants, then those of its conventions whose label no variant has."""
        variants = self.variants()
        taken = {choice.label for choice in variants}
        return variants + tuple(c for c in self.conventions if c.label not in taken)

    def choice(self, label: str) -> EstimatorChoice:
        """The choice of :meth:`choices` labelled ``label``."""
        return next(c for c in self.choices() if c.label == label)

    def convention_of(self, release: TrainerRelease) -> EstimatorChoice | None:
        """The convention ``release`` of its trainer computes this estimator by, or None when it
        names none of that trainer's (the estimator's defaults then stand)."""
        return next((c for c in self.conventions if c.for_release(release)), None)

    def trainers(self) -> tuple[str, ...]:
        """The trainers whose releases its conventions name (empty: none names a trainer, and
        its defaults are what every release computes)."""
        return tuple(dict.fromkeys(r.trainer for c in self.conventions for r in c.releases))

    def computed_by(self, release: TrainerRelease) -> bool:
        """Whether ``release``'s trainer computes it: its conventions name that trainer, or no trainer."""
        trainers = self.trainers()
        return not trainers or release.trainer in trainers

    def frame_adapter(self) -> str:
        """The name of the adapter that feeds it in :func:`~trajlens.estimators.adapters`."""
        return self.adapter or self.kind.value
