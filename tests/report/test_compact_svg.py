"""Inline figures' path data is compacted without moving any vertex by more than the rounding."""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from trajlens.report.plots import PATH_DECIMALS, compact_path, compact_svg  # noqa: E402


def _vertices(data: str) -> list[tuple[str, tuple[float, ...]]]:
    """Each command of absolute path data as (letter, the point or control points it ends at),
    H and V spelled out as L to a full point; a repeated point of a line left out."""
    out: list[tuple[str, tuple[float, ...]]] = []
    point = (0.0, 0.0)
    for letter, numbers in re.findall(r"([A-Za-z])([^A-Za-z]*)", data):
        values = tuple(float(v) for v in numbers.split())
        if letter == "L" and len(values) > 2:  # lines in a row under one letter
            for index in range(0, len(values), 2):
                if values[index:index + 2] != point:
                    out.append(("L", values[index:index + 2]))
                point = values[index:index + 2]
            continue
        if letter == "H":
            letter, values = "L", (values[0], point[1])
        elif letter == "V":
            letter, values = "L", (point[0], values[0])
        if letter == "L" and values == point:
            continue
        out.append((letter, values))
        if len(values) >= 2:
            point = values[-2:]
    return out


def _figure_svg() -> str:
    figure, axes = plt.subplots(figsize=(9, 4))
    steps = list(range(200))
    axes.step(steps, [(s * 37 % 11) / 11 for s in steps], where="post")
    axes.fill_between(steps, [0.1] * 200, [(s % 7) / 7 for s in steps], step="post", alpha=0.3)
    axes.plot(steps, [s / 200 for s in steps], marker="o")
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    plt.close(figure)
    return buffer.getvalue()


def test_compacted_paths_keep_every_vertex_within_the_rounding():
    svg = _figure_svg()
    compacted = compact_svg(svg)
    before, after = re.findall(r'\bd="([^"]*)"', svg), re.findall(r'\bd="([^"]*)"', compacted)
    assert len(before) == len(after) > 10
    for original, short in zip(before, after):
        rounded = _vertices(compact_path(original))
        assert rounded == _vertices(short)
        exact = [(letter, tuple(round(v, PATH_DECIMALS) for v in values)) for letter, values in _vertices(original)]
        kept = [(letter, values) for index, (letter, values) in enumerate(exact)
                if not (letter == "L" and index and values == exact[index - 1][1][-2:])]
        assert [letter for letter, _ in kept] == [letter for letter, _ in rounded]
        for (_, a), (_, b) in zip(kept, rounded):
            assert all(abs(x - y) <= 0.5 * 10 ** -PATH_DECIMALS + 1e-9 for x, y in zip(a, b))
    assert len(compacted) < 0.7 * len(svg)


def test_path_data_it_does_not_handle_is_left_as_it_is():
    assert compact_path("1 2 L 3 4") == "1 2 L 3 4"
    assert compact_path("M 0 0 L 0 0 L 1.004 0 L 1.004 2.5 z") == "M 0 0 H 1 V 2.5 z"
    assert compact_path("M 0 0 L 1 1 L 2 3 L 2 3 L 4 5") == "M 0 0 L 1 1 2 3 4 5"
