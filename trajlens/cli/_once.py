"""Options that take one value refuse it given twice.

Click keeps the last value of an option given twice, so ``trajlens check store --run sao-r6 --run
sao-r7`` checked sao-r7 alone and passed, and ``attribute --run a --run b`` attributed b without
a word. Every command is parsed by :class:`OnceOptionsCommand`, which refuses such a repeat as
the command line's other usage errors are refused (exit status 2), before anything runs; with
``--help`` the help is shown. Options declared to repeat (``report --run``, ``--param``,
``--option``) repeat as before.

The parameters are read by their interface (``opts``, ``multiple``, ...), as the rest of the
command line reads click's errors: Typer has used click and a copy of it of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typer.core import TyperCommand


def _value_options(params: Sequence[Any]) -> dict[str, Any]:
    """Each spelling (``--run``, ``-r``) of the options that take a value."""
    return {spelling: param for param in params
            if getattr(param, "param_type_name", None) == "option" and not (param.is_flag or param.count)
            for spelling in (*param.opts, *param.secondary_opts)}


def repeated_option(params: Sequence[Any], args: Sequence[str]) -> str | None:
    """The first option of ``params`` that takes one value and is given more than once in
    ``args`` (as ``--run X``, ``--run=X``, ``-r X`` or ``-rX``), as the user spelled it the
    second time; None when there is none. Arguments after ``--`` are values, not options."""
    options = _value_options(params)
    seen: set[str] = set()
    words = iter(args)
    for word in words:
        if word == "--":
            break
        if word.startswith("--"):
            spelling, attached = word.partition("=")[0], "=" in word
        elif word.startswith("-") and len(word) > 1:
            spelling, attached = word[:2], len(word) > 2
        else:
            continue
        option = options.get(spelling)
        if option is None:
            continue
        if not option.multiple:
            if option.name in seen:
                return spelling
            seen.add(str(option.name))
        if not attached:
            next(words, None)  # its value, which may itself start with a dash
    return None


class OnceOptionsCommand(TyperCommand):
    """A Typer command that refuses an option of one value given twice (see the module)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        words = args[:args.index("--")] if "--" in args else args
        asks_help = any(word in self.get_help_option_names(ctx) for word in words)
        repeated = None if asks_help else repeated_option(self.params, args)
        if repeated is not None:
            ctx.fail(f"Option '{repeated}' is given more than once; it takes one value (run the command once per value).")
        return super().parse_args(ctx, args)
