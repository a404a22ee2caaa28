"""Optional sections of a run in the HTML report, registered in one place.

A section provider is a function ``(store, run_id) -> str | None`` returning an HTML fragment
(or None when it has nothing to say about the run). :data:`RUN_SECTIONS` names each provider
by its dotted path, resolved when the report is written: a provider whose module is not
installed is skipped, so a section appears once the module that provides it exists. To add a
section, add one line here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

SectionProvider = Callable[[Any, str], "str | None"]


@dataclass(frozen=True)
class RunSection:
    """An optional per-run section of the HTML report."""

    key: str
    """Anchor and CSS name of the section."""
    title: str
    provider: str
    """``module:function`` of the provider, a :data:`SectionProvider`."""


RUN_SECTIONS: tuple[RunSection, ...] = (
    # Hook point: which behaviour explains reward (trajlens.attribution).
    RunSection("attribution", "Attribution", "trajlens.attribution.report:run_section"),
    # Hook point: health checks of the run and their verdicts (trajlens.checks).
    RunSection("checks", "Checks", "trajlens.checks.report:run_section"),
)


def resolve(section: RunSection) -> SectionProvider | None:
    """The provider function, or None when its module is not there (yet)."""
    module_name, _, function = section.provider.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            return None
        raise
    return getattr(module, function, None)


def run_sections(store: Any, run_id: str) -> list[tuple[RunSection, str]]:
    """Every registered section that has something to say about ``run_id``, with its HTML."""
    written = []
    for section in RUN_SECTIONS:
        provider = resolve(section)
        fragment = provider(store, run_id) if provider is not None else None
        if fragment:
            written.append((section, fragment))
    return written
