"""``NAME=VALUE`` and ``NAME:TYPE=VALUE`` pairs, read the same way by every command.

``--param`` (query parameters) reads an untyped value as text, so ``--param run_id=123``
matches the run called "123"; ``--param n:int=3`` binds the number 3. ``--option`` (estimator
options) reads an untyped value as JSON where it parses (``gamma=0.99``, ``whiten=false``,
``channels=[0,1]``) and as text otherwise. Every malformed pair is reported at once.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Callable, Optional

import typer

from trajlens.errors import ConfigError, non_utf8

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BOOLEANS: dict[str, bool] = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _boolean(text: str) -> bool:
    if text.lower() not in BOOLEANS:
        raise ValueError(f"expected one of {', '.join(BOOLEANS)}")
    return BOOLEANS[text.lower()]


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"expected JSON, whose numbers are finite, found {name}")


def _json(text: str) -> Any:
    """A JSON value, as the standard has it: ``NaN`` and ``Infinity`` (which Python's reader takes)
    are refused, as ``:float=nan`` is; a number too large for a float (``1e400``) too."""
    value = json.loads(text, parse_constant=_no_constant)
    if not _finite(value):
        raise ValueError(f"expected finite numbers, found {text}")
    return value


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _json_or_text(text: str) -> Any:
    try:
        return _json(text)
    except json.JSONDecodeError:
        return text


# TYPE in NAME:TYPE=VALUE -> how the value is read
VALUE_TYPES: dict[str, Callable[[str], Any]] = {
    "text": str,
    "str": str,
    "int": int,
    "float": _finite_float,
    "bool": _boolean,
    "json": _json,
}


def parse_pairs(pairs: list[str], *, flag: str, untyped: Callable[[str], Any], example: str) -> dict[str, Any]:
    """Read ``NAME=VALUE`` / ``NAME:TYPE=VALUE`` pairs; raise :class:`ConfigError` listing every bad one."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for pair in pairs:
        head, sep, text = pair.partition("=")
        name, _, type_name = head.partition(":")
        if not sep or not NAME.fullmatch(name):
            problems.append(f"{flag} {pair!r}: expected NAME=VALUE or NAME:TYPE=VALUE, such as {example}")
            continue
        if name in values:
            problems.append(f"{flag} {pair!r}: {name} is given twice")
            continue
        if type_name and type_name not in VALUE_TYPES:
            problems.append(f"{flag} {pair!r}: unknown type {type_name!r}; types: {', '.join(VALUE_TYPES)}")
            continue
        read = VALUE_TYPES[type_name] if type_name else untyped
        try:
            values[name] = read(text)
        except ValueError as error:
            reason = str(error).splitlines()[0] if str(error) else "unreadable"
            kind = type_name or "value"
            problems.append(f"{flag} {pair!r}: not {'an' if kind[0] in 'aeiou' else 'a'} {kind} ({reason})")
    if problems:
        raise ConfigError(problems)
    return values


def utf8_argument(value: str, flag: str) -> str:
    """``value`` unchanged; a one-line :class:`ConfigError` when it holds bytes that are not UTF-8
    (:func:`trajlens.errors.non_utf8`)."""
    found = non_utf8(value)
    if found is not None:
        raise ConfigError([f"{flag}: expected UTF-8 text, found {found}"])
    return value


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """Query parameters: text unless typed (``run_id=123`` is the text "123"; ``n:int=3`` the number)."""
    return parse_pairs(pairs, flag="--param", untyped=str, example="run_id=sao-r6 or n:int=3")


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """Estimator options: JSON where the value parses (numbers, true/false, lists), else text. A
    ``LABEL.NAME=VALUE`` left here names a label no ``--estimator`` gives (the labelled ones are
    taken off before, by the command that has labels)."""
    labelled = [pair for pair in pairs if (name := pair.partition("=")[0]).count(".") == 1
                and all(NAME.fullmatch(part) for part in name.partition(":")[0].split("."))]
    if labelled:
        raise ConfigError([f"--option {pair!r}: no --estimator is labelled {pair.partition('.')[0]!r}; give the "
                           "option as NAME=VALUE" for pair in labelled])
    return parse_pairs(pairs, flag="--option", untyped=_json_or_text, example="gamma=0.99")


def parse_trainer_option(text: str) -> Any:
    """``--trainer verl==0.8.0`` (or ``trl==1.5``, or a bare ``verl``/``trl`` for its current
    release) as a :class:`~trajlens.estimators.spec.TrainerRelease`; a bad value is a one-line
    :class:`ConfigError`, and a release outside those compared gets a note on stderr."""
    from trajlens.estimators.spec import parse_trainer, uncompared

    try:
        release = parse_trainer(text)
    except ValueError as error:
        raise ConfigError([f"--trainer {text!r}: {error}"]) from None
    if (note := uncompared(release)) is not None:
        typer.echo(f"note: --trainer {text}: {note}", err=True)
    return release


COUNT_MAX = 2**31 - 1
"""The largest count or seed an integer option takes (rows, --k, --n, --top, --seed): beyond it
a number fits no table, array index or generator a command hands it to."""


# Where per-step work runs (trajlens.engine), shared by classify, advantages and attribute.
EngineOption = Annotated[str, typer.Option(
    "--engine", help="Where the per-step work runs: local (this process) or ray (a Ray cluster, a task per step, and one for "
    "the steps of a packed file; pip install 'trajlens\\[ray]').")]
RayAddressOption = Annotated[Optional[str], typer.Option(
    "--ray-address", help="With --engine ray: the cluster to join (auto: the one `ray start --head` started here; "
    "ray://HOST:10001; HOST:6379). Default: start a local cluster.")]

__all__ = ["EngineOption", "RayAddressOption", "VALUE_TYPES", "parse_options", "parse_pairs", "parse_params",
           "parse_trainer_option", "utf8_argument"]
