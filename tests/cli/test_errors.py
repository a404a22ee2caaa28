"""One exception hierarchy: every class exported, documented and raised somewhere."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import trajlens
import trajlens.errors as errors

PACKAGE = Path(trajlens.__file__).parent


def _exception_classes() -> list[type]:
    return [value for value in vars(errors).values()
            if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == errors.__name__]


def test_every_error_class_is_exported_documented_and_rooted():
    for cls in _exception_classes():
        assert cls.__name__ in errors.__all__ and cls.__name__ in trajlens.__all__, cls
        assert getattr(trajlens, cls.__name__) is cls
        assert issubclass(cls, errors.TrajlensError) and inspect.getdoc(cls)


def test_no_error_class_is_dead():
    sources = {path: path.read_text() for path in PACKAGE.rglob("*.py")
               if path.name != "errors.py" and path != PACKAGE / "__init__.py"}
    for cls in _exception_classes():
        if cls is errors.TrajlensError:
            pattern = re.compile(r"except[^:]*\bTrajlensError\b")
        else:
            pattern = re.compile(rf"\b{cls.__name__}\(")
        users = [str(path.relative_to(PACKAGE)) for path, text in sources.items() if pattern.search(text)]
        assert users, f"{cls.__name__} is raised nowhere"


def test_missing_frame_column_is_not_a_schema_error():
    import polars as pl
    import pytest

    from trajlens.classify import classify_calls

    with pytest.raises(errors.FrameError) as caught:
        classify_calls(pl.DataFrame({"tool_name": ["bash"], "arguments": ["{}"]}))
    assert not isinstance(caught.value, errors.SchemaError)
