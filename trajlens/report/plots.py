"""Figures of a run's behaviour and advantages, as SVG with hover values (a file beside the
Markdown, and inline in the HTML report: one drawing for both), and as PNG on request.

Why matplotlib SVG rather than an interactive spec (Vega-Lite, Plotly): the report must open
from disk with no network and be byte-reproducible for the same store and seed. Inlining
Plotly's or Vega's JavaScript adds 1-4 MB to every page and a second plotting stack to the
install; matplotlib is already the project's plotting library, renders deterministically
(fixed ``svg.hashsalt``, no date), and its SVG takes a ``<title>`` per mark, which every
browser shows as a tooltip: hover values without any script.

The figures use matplotlib's object API (``Figure`` and its canvas), never ``pyplot`` or
``matplotlib.use``, so they change no global state and notebooks keep their inline backend.
An empty figure says "no data" instead of showing a blank frame; every kind of mark has a
legend entry; titles carry the real N and wrap to the figure's width, so a long one is never cut
at the figure's edge.

Many figures share one page, and matplotlib names the elements of every SVG alike (``tip0``,
``patch_1``, clip paths hashed from a fixed salt), so :meth:`Chart.svg` prefixes every id of a
figure, and every reference to one, with a prefix of its own: ids stay unique on the page and
each figure's clip paths and markers stay its own. The SVG scales down to its container.
"""

from __future__ import annotations

import hashlib
import html
import io
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

# Colours per behaviour class, fixed so every plot of every run reads the same.
CLASS_COLOURS: dict[str, str] = {
    "submit": "#4c4c4c",
    "test_suite": "#1b9e77",
    "test_targeted": "#66c2a5",
    "quick_check": "#d95f02",
    "run_script": "#fc8d62",
    "edit": "#7570b3",
    "view": "#8da0cb",
    "search": "#a6d854",
    "think": "#e7298a",
    "other": "#bdbdbd",
}
RENDER_SETTINGS: dict[str, object] = {"svg.hashsalt": "trajlens", "svg.fonttype": "none", "font.size": 9}
"""Matplotlib settings applied (in a context, not globally) while a figure is drawn and saved."""
MIN_SPAN = 0.1
"""Smallest y-axis span of an advantage panel, so values constant by construction (a whitened
batch's mean of 1e-9) do not fill the axis as if they swung."""


@dataclass
class Chart:
    """A drawn figure and the hover text of each of its marks (by SVG element id)."""

    figure: object
    tips: dict[str, str] = field(default_factory=dict)
    hover_only: list[object] = field(default_factory=list)
    """Invisible marks that exist only to carry hover text: drawn in the SVG, left out of the PNG."""
    _svg: str | None = field(default=None, repr=False)
    """The SVG with its default prefix, once drawn: the file and the HTML page share one drawing."""

    def tip(self, artist: object, text: str) -> None:
        """Give ``artist`` the hover text ``text`` in the SVG."""
        gid = f"tip{len(self.tips)}"
        artist.set_gid(gid)  # type: ignore[attr-defined]
        self.tips[gid] = text

    def hover(self, artist: object, text: str) -> None:
        """Like :meth:`tip`, for an invisible mark that only carries ``text`` (a hover column)."""
        self.tip(artist, text)
        self.hover_only.append(artist)

    def png(self, path: Path) -> Path:
        """Write the figure as PNG (no timestamp in the file)."""
        import matplotlib

        path.parent.mkdir(parents=True, exist_ok=True)
        for artist in self.hover_only:  # a PNG has no hover: its invisible marks need no drawing
            artist.set_visible(False)  # type: ignore[attr-defined]
        try:
            with matplotlib.rc_context(RENDER_SETTINGS):
                self.figure.savefig(path, dpi=110, metadata={"Software": None})  # type: ignore[attr-defined]
        finally:
            for artist in self.hover_only:
                artist.set_visible(True)  # type: ignore[attr-defined]
        self._freeze_layout()
        return path

    def write_svg(self, path: Path) -> Path:
        """Write :meth:`svg` as a file (a standalone SVG: its hover text shows when it is opened
        on its own)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.svg() + "\n", encoding="utf-8")
        return path

    def svg(self, prefix: str | None = None) -> str:
        """The figure as an SVG element with a ``<title>`` (the browser's tooltip) per mark, every
        element id (and reference to one) starting with ``prefix``; by default a prefix derived
        from the figure's content, so the same figure gives the same bytes and different figures
        on one page never share an id. With the default prefix the figure is drawn once, however
        often this is asked."""
        if prefix is None and self._svg is not None:
            return self._svg
        text = self._drawn_svg(prefix)
        if prefix is None:
            self._svg = text
        return text

    def _drawn_svg(self, prefix: str | None) -> str:
        import matplotlib

        buffer = io.StringIO()
        with matplotlib.rc_context(RENDER_SETTINGS):
            self._lay_out_for_svg()
            self.figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})  # type: ignore[attr-defined]
        self._freeze_layout()
        text = buffer.getvalue()
        text = text[text.index("<svg"):]
        text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)

        def titled(match: re.Match) -> str:
            return f'{match.group(0)}<title>{html.escape(self.tips[match.group(1)])}</title>'

        text = re.sub(r'<g id="(tip\d+)">', titled, text)
        if prefix is None:
            prefix = "f" + hashlib.sha1(text.encode()).hexdigest()[:10] + "-"
        text = compact_svg(prefixed_ids(text, prefix))
        return text.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)

    def _lay_out_for_svg(self) -> None:
        """Run the figure's layout engine once, as saving an SVG would (on an SVG canvas, so text
        is measured as the SVG draws it), and freeze it. Saving a figure that has a layout
        engine first draws it in full without output to lay it out; laying it out alone and
        saving it without an engine gives the same axes in one draw."""
        from matplotlib.backends.backend_svg import FigureCanvasSVG

        figure: Any = self.figure
        engine = figure.get_layout_engine()
        if engine is None or not figure.axes:
            return
        dpi, canvas = figure.dpi, figure.canvas
        FigureCanvasSVG(figure)
        try:
            engine.execute(figure)
        finally:
            figure.dpi = dpi
            figure.set_canvas(canvas)
        self._freeze_layout()

    def _freeze_layout(self) -> None:
        """Keep the axes where the layout put them and drop the layout engine: a figure without
        one is saved in a single draw (with one, even a placeholder, matplotlib draws it twice),
        and a second save (SVG then PNG) does not lay it out again."""
        import matplotlib

        # Without an engine named, matplotlib would take one from these settings.
        with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            self.figure.set_layout_engine(None)  # type: ignore[attr-defined]


def prefixed_ids(svg: str, prefix: str) -> str:
    """``svg`` with ``prefix`` before every ``id`` and every ``#id`` reference to one
    (``href``, ``xlink:href``, ``url(#...)``)."""
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if not ids:
        return svg

    def renamed(match: re.Match) -> str:
        name = match.group(2)
        return f"{match.group(1)}{prefix}{name}{match.group(3)}" if name in ids else match.group(0)

    svg = re.sub(r'(\bid=")([^"]+)(")', renamed, svg)
    svg = re.sub(r'(href="#)([^"]+)(")', renamed, svg)
    return re.sub(r'(url\(#)([^)]+)(\))', renamed, svg)


PATH_DECIMALS = 2
"""Decimals kept of a figure's path coordinates (in points: a hundredth of a point is far
below a screen pixel)."""

_PATH_DATA = re.compile(r'\bd="([^"]*)"')
_PATH_TOKEN = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[A-Za-z]")


def _coordinate(value: str) -> str:
    text = f"{float(value):.{PATH_DECIMALS}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def compact_path(data: str) -> str:
    """SVG path data drawn the same at screen resolution, in fewer bytes: coordinates to
    :data:`PATH_DECIMALS` decimals, one space between tokens, a line along an axis as ``H`` or
    ``V``, lines in a row under one ``L``, and a line to the point the path is already at (after
    rounding) left out."""
    out: list[str] = []
    point: list[str] | None = None
    command: list[str] = []

    def flush() -> None:
        nonlocal point
        if not command:
            return
        letter, numbers = command[0], [_coordinate(v) for v in command[1:]]
        if letter == "L" and len(numbers) == 2 and point is not None:
            x, y = numbers
            if [x, y] == point:
                return
            if y == point[1] or x == point[0]:
                out.append(f"H {x}" if y == point[1] else f"V {y}")
                point = [x, y]
                return
        if letter == "L" and out and out[-1].startswith("L "):
            out[-1] += " " + " ".join(numbers)  # a line after a line needs no letter of its own
        else:
            out.append(" ".join([letter, *numbers]))
        point = numbers[-2:] if letter in "MLCQ" and len(numbers) >= 2 and len(numbers) % 2 == 0 else None

    for token in _PATH_TOKEN.findall(data):
        if token.isalpha():
            flush()
            command = [token]
        elif command:
            command.append(token)
        else:
            return data  # numbers before any command: not path data this handles
    flush()
    return " ".join(out)


_BETWEEN_TAGS = re.compile(r">\s+<")


def compact_svg(svg: str) -> str:
    """An SVG with every path's data compacted (:func:`compact_path`) and the indentation
    between its tags left out."""
    return _BETWEEN_TAGS.sub("><", _PATH_DATA.sub(lambda m: f'd="{compact_path(m.group(1))}"', svg))


TITLE_CHARACTERS_PER_INCH = 8.5
"""Characters of a title per inch of figure width before it wraps (titles are about 11 pt)."""


def _title(axis, text: str, width: float = 9.0, share: float = 0.8) -> None:
    """Set ``axis``'s title, wrapped to ``share`` of a ``width``-inch figure (the axes' part of it)."""
    axis.set_title(_wrapped(text, width * share))


def _wrapped(text: str, inches: float) -> str:
    return "\n".join(textwrap.wrap(text, max(int(inches * TITLE_CHARACTERS_PER_INCH), 20), break_long_words=False))


def _figure(width: float = 9.0, height: float = 4.2, rows: int = 1):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(rows, 1, sharex=True) if rows > 1 else figure.subplots()
    return figure, axes


def _stacked_panels(count: int, inches: float, margin: float) -> tuple[Chart, list]:
    """A chart of ``count`` panels (at least one), ``inches`` tall each, stacked on one x axis."""
    figure, axes = _figure(height=inches * max(count, 1) + margin, rows=max(count, 1))
    return Chart(figure), list(axes) if count > 1 else [axes]


def _no_data(axis, title: str) -> None:
    _title(axis, title)
    axis.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=14, color="#777777", transform=axis.transAxes)
    axis.set_xticks([])
    axis.set_yticks([])


def _integer_steps(axis, steps: Sequence[int] = ()) -> None:
    """Whole training steps on the x axis; of a run of one step, that step alone (a locator
    given a range under one step ticks fractions of it)."""
    from matplotlib.ticker import FixedLocator, MaxNLocator

    axis.xaxis.set_major_locator(FixedLocator(list(steps)) if len(set(steps)) == 1 else MaxNLocator(integer=True))


MAX_HOVER_COLUMNS = 300
"""Most hover targets per figure; beyond this many x values, neighbouring ones share a column,
so a run of 100,000 steps costs 300 marks, not 100,000."""


MAX_DRAWN_STEPS = 1_000
"""Most x positions a per-step figure draws; beyond this many steps, consecutive steps are
pooled into this many bins (a figure is about 1,000 pixels wide), so that the PNG, and the SVG
of the HTML report, stay the same size whatever the number of steps."""


def _hover_columns(chart: Chart, axis, xs: Sequence[float], text_of: Callable[[int], str], width: float) -> None:
    """Invisible full-height bars, each carrying the values at its x (or its few x's);
    ``text_of(i)`` is the text of ``xs[i]``, asked only for the x's a bar shows."""
    from matplotlib.patches import Rectangle

    size = max(1, -(-len(xs) // MAX_HOVER_COLUMNS))
    full_height = axis.get_xaxis_transform()  # x in data, y from the axis' bottom (0) to its top (1)
    for start in range(0, len(xs), size):
        stop = min(start + size, len(xs))
        left = xs[start] - width / 2
        # what axvspan draws, without its per-call bookkeeping of data limits (done once below):
        # a few hundred columns cost a fifth of the time
        bar = Rectangle((left, 0.0), xs[stop - 1] + width / 2 - left, 1.0, transform=full_height,
                        color="white", alpha=0.0, linewidth=0)
        axis.add_artist(bar)
        shown = "\n".join(text_of(i) for i in range(start, min(stop, start + 5)))
        chart.hover(bar, shown + (f"\n(and {stop - start - 5} more steps)" if stop - start > 5 else ""))
    if len(xs):  # the x range the columns span, as axvspan would have counted it
        axis.update_datalim([(xs[0] - width / 2, 0.0), (xs[-1] + width / 2, 0.0)], updatey=False)


def _step_bins(steps: pl.Series) -> pl.Expr | None:
    """Bin of each row of a frame sorted by ``step`` when there are more than
    :data:`MAX_DRAWN_STEPS` distinct steps (None when each step is drawn on its own)."""
    count = steps.n_unique()
    if count <= MAX_DRAWN_STEPS:
        return None
    return ((pl.col("step").rank("dense") - 1) * MAX_DRAWN_STEPS // count).alias("__bin")


@dataclass(frozen=True)
class Alarm:
    """A check that fired: a line at the first step it fired, or, for a check that compares
    stages (``last_step`` given), a band over the steps of the later stage it judged."""

    name: str
    severity: str
    """'error' or 'warning'."""
    first_step: int
    last_step: int | None = None


ALARM_COLOURS: dict[str, str] = {"error": "#b00020", "warning": "#e08000"}
ALARM_DASHES: tuple[tuple[float, ...], ...] = ((6.0, 3.0), (2.0, 2.0), (8.0, 2.0, 2.0, 2.0), (3.0, 5.0))
"""Dash patterns the lines take in turn, so lines at one step stay told apart."""


def _alarm_lines(chart: Chart, axis, alarms: Sequence[Alarm]) -> None:
    """Each alarm as a dashed line (errors drawn over warnings) or a band over a stage."""
    ordered = sorted(alarms, key=lambda alarm: alarm.severity == "error")
    for index, alarm in enumerate(ordered):
        colour = ALARM_COLOURS.get(alarm.severity, "#555555")
        top = 3 if alarm.severity == "error" else 2
        if alarm.last_step is not None:
            # from the edge of its first step's column to its last step (where a step="mid" fill ends)
            span = axis.axvspan(alarm.first_step - 0.5, alarm.last_step, facecolor=colour, alpha=0.08,
                                edgecolor=colour, hatch="//", linewidth=0, zorder=top,
                                label=f"{alarm.severity}: {alarm.name} (stage of steps {alarm.first_step}-{alarm.last_step})")
            chart.tip(span, f"check {alarm.name} ({alarm.severity}) fired comparing the stage of steps "
                            f"{alarm.first_step}-{alarm.last_step} with an earlier stage")
            continue
        line = axis.axvline(alarm.first_step, color=colour, linewidth=1.4 if alarm.severity == "error" else 1.2,
                            dashes=ALARM_DASHES[index % len(ALARM_DASHES)], zorder=top + 1,
                            label=f"{alarm.severity}: {alarm.name} (from step {alarm.first_step})")
        chart.tip(line, f"check {alarm.name} ({alarm.severity}) fired from step {alarm.first_step}")


def class_shares_by_step(measures: pl.DataFrame, title: str, alarms: Sequence[Alarm] = ()) -> Chart:
    """Stacked shares of behaviour classes per step (calls pooled over the step's trajectories:
    ``share:<class>`` of :func:`~trajlens.classify.per_trajectory.behaviour_specs`, a class's
    calls over ``n_calls``), with a dashed line where each fired check first fired, or a band over
    the stage a check that compares stages fired on."""
    figure, axis = _figure()
    chart = Chart(figure)
    classes = [c for c in CLASS_COLOURS if f"count_{c}" in measures.columns]
    per_step, binned = _pooled_shares(measures, classes)
    total = per_step["n_calls"]
    title = f"{title} (N={measures.height} trajectories, {int(measures['n_calls'].sum()):,} calls)"
    if per_step.height < 2:
        _no_data(axis, title + ": one step, see the per-trajectory shares")
        return chart
    if binned:
        title = f"{title}, steps pooled in {per_step.height} bins"
    steps = per_step["step"].to_numpy()
    bottom = None
    shares = {}
    for klass in classes:
        share = per_step[f"share:{klass}"].fill_null(0.0).to_numpy()
        shares[klass] = share
        axis.fill_between(steps, 0 if bottom is None else bottom, share if bottom is None else bottom + share,
                          step="mid", color=CLASS_COLOURS[klass], label=klass, linewidth=0)
        bottom = share if bottom is None else bottom + share

    def text_of(i: int) -> str:
        where = (f"step {steps[i]}" if not binned
                 else f"steps {per_step['first'][i]}-{per_step['last'][i]}")
        return (f"{where}: " + ", ".join(f"{k} {shares[k][i]:.2f}" for k in classes if shares[k][i] > 0)
                + f" ({int(total[i])} calls, {per_step['n'][i]} trajectories)")

    _hover_columns(chart, axis, steps, text_of, 1.0)
    _alarm_lines(chart, axis, alarms)
    _integer_steps(axis)
    axis.set(xlabel="training step", ylabel="share of tool calls", ylim=(0, 1),
             xlim=(steps.min() - 0.5, steps.max() + 0.5))
    _title(axis, title, share=0.75)  # the legend takes the figure's right quarter
    axis.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    return chart


def _pooled_shares(measures: pl.DataFrame, classes: Sequence[str]) -> tuple[pl.DataFrame, bool]:
    """Each step with calls (``step``, ``first``, ``last``, ``n`` trajectories, ``n_calls``) and
    each class's ``share:<class>`` of its calls: the checks' statistics of the measure
    (:func:`~trajlens.checks.step_measures.measure_stats_of`) pooled over the step's
    trajectories, the value every surface gives. Over :data:`MAX_DRAWN_STEPS` steps, rows are
    bins of consecutive steps (drawn at their mean step), pooled over the bin; and whether they are."""
    from trajlens.checks.step_measures import measure_stats_of
    from trajlens.intervals import added, pooled

    names = [f"share:{klass}" for klass in classes]
    stats = measure_stats_of(measures, names)
    calls = stats.group_by("step").agg(pl.col("n").first().alias("n_calls")).filter(pl.col("n_calls") > 0)
    steps = measures.group_by("step").len("n").join(calls, on="step").sort("step")
    bins = _step_bins(steps["step"])
    key = "__bin" if bins is not None else "step"
    if bins is not None:
        steps = steps.with_columns(bins)
        stats = stats.join(steps.select("step", "__bin"), on="step")
        steps = steps.group_by("__bin", maintain_order=True).agg(
            pl.col("step").mean(), pl.col("step").min().alias("first"), pl.col("step").max().alias("last"),
            pl.col("n").sum(), pl.col("n_calls").sum())
    else:
        steps = steps.with_columns(pl.col("step").alias("first"), pl.col("step").alias("last"))
    shares = pooled(added(stats, by=(key, "measure")), proportion=False).pivot(on="measure", index=key, values="value")
    return steps.join(shares, on=key, how="left").select(
        "step", "first", "last", "n", "n_calls", *(pl.col(n) if n in shares.columns else pl.lit(None).alias(n)
                                                    for n in names)), bins is not None


def class_shares_per_trajectory(measures: pl.DataFrame, title: str) -> Chart:
    """Box plots of each class's share of a trajectory's calls: the spread across trajectories."""
    figure, axis = _figure(height=3.8)
    chart = Chart(figure)
    with_calls = measures.filter(pl.col("n_calls") > 0)
    classes = [c for c in CLASS_COLOURS if f"share_{c}" in with_calls.columns and with_calls[f"share_{c}"].sum() > 0]
    title = f"{title} (N={with_calls.height} trajectories with calls)"
    if with_calls.is_empty() or not classes:
        _no_data(axis, title)
        return chart
    from trajlens.report.summary import quartiles

    data = [with_calls[f"share_{c}"].to_numpy() for c in classes]
    # trajectories beyond the whiskers are drawn: a class that few trajectories use (one quick check
    # in 22) has a box of zero width, and its row would otherwise show nothing
    boxes = axis.boxplot(data, orientation="horizontal", patch_artist=True, widths=0.6,
                         flierprops={"marker": "o", "markersize": 3, "markerfacecolor": "none", "alpha": 0.6})
    for patch, klass, values in zip(boxes["boxes"], classes, data):
        patch.set_facecolor(CLASS_COLOURS[klass])
        q1, median, q3 = quartiles(pl.Series(values))
        # the class spread table's quartiles; its share of all calls is the one share the report gives
        chart.tip(patch, f"{klass}: median {median:.2f}, quartiles {q1:.2f}-{q3:.2f} of the shares of "
                         f"{len(values)} trajectories")
    axis.set_yticks(range(1, len(classes) + 1), classes)
    axis.set(xlabel="share of the trajectory's tool calls (box: quartiles, line: median, whiskers: 1.5 IQR, "
                    "circles: trajectories beyond)", xlim=(0, 1))
    _title(axis, title, share=0.75)  # the class names take the left of the figure
    from matplotlib.patches import Patch

    axis.legend(handles=[Patch(facecolor="#cccccc", edgecolor="black", label="quartiles, median")],
                fontsize=8, frameon=False, loc="lower right")
    return chart


def distributions(measures: pl.DataFrame, title: str) -> Chart:
    """Histograms of turns and model tokens per trajectory."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 3.4), layout="constrained")
    left, right = figure.subplots(1, 2)
    chart = Chart(figure)
    for axis, column, label in ((left, "num_turns", "turns"), (right, "model_tokens", "model tokens")):
        values = measures[column].drop_nulls().cast(pl.Float64) if column in measures.columns else pl.Series([])
        name = f"{label} per trajectory (N={values.len()})"
        if values.is_empty():
            _no_data(axis, name)
            continue
        counts, edges, patches = axis.hist(values.to_numpy(), bins=min(30, max(values.n_unique(), 1)),
                                           color="#8da0cb", label="trajectories")
        for count, low, high, patch in zip(counts, edges, edges[1:], patches):
            chart.tip(patch, f"{label} {low:,.0f}-{high:,.0f}: {int(count)} trajectories")
        median = float(values.median())
        # a median between two counts (3.5 turns) says so: the line is drawn where it is
        axis.axvline(median, color="black", linewidth=1, label=f"median {median:,.0f}" if median.is_integer()
                     else f"median {median:,.1f}")
        axis.set(xlabel=label, ylabel="trajectories")
        _title(axis, name, share=0.45)
        from matplotlib.ticker import MaxNLocator

        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        axis.legend(fontsize=8, frameon=False)
    figure.suptitle(_wrapped(title, 9.0))
    return chart


STAGE_PLOT_METRICS: tuple[str, ...] = (
    "share:think", "ran_suite", "verification:test_suite", "verification:test_targeted", "verification:quick_check",
    "verification:run_script",
)
"""Metrics the report plots per stage (:func:`stage_rates`): the r6 collapse signal and the r7
verification shift. A finding about another metric links to its row of the stage table."""


def stage_rates(rates: pl.DataFrame, metrics: list[str], title: str) -> Chart:
    """Sample rates with 95% intervals per stage, population values as crosses."""
    figure, axis = _figure()
    chart = Chart(figure)
    chosen = rates.filter(pl.col("metric").is_in(metrics)).drop_nulls(["value", "ci_low", "ci_high"])
    if chosen.is_empty():
        _no_data(axis, title)
        return chart
    stages = chosen.select("stage", "stage_index").unique().sort("stage_index")["stage"].to_list()
    present = [m for m in metrics if m in set(chosen["metric"].to_list())]
    width = 0.8 / max(len(present), 1)
    for i, metric in enumerate(present):
        rows = chosen.filter(pl.col("metric") == metric).sort("stage_index")
        x = [stages.index(s) + (i - (len(present) - 1) / 2) * width for s in rows["stage"]]
        value = rows["value"].to_numpy()
        lower = (value - rows["ci_low"].to_numpy()).clip(min=0.0)
        upper = (rows["ci_high"].to_numpy() - value).clip(min=0.0)
        klass = metric.split(":")[-1]
        bars = axis.bar(x, value, width=width * 0.9, color=CLASS_COLOURS.get(klass, "#999999"), label=metric)
        for bar, row in zip(bars, rows.iter_rows(named=True)):
            chart.tip(bar, f"{metric} in {row['stage']}: sample {row['value']:.3f} [{row['ci_low']:.3f}, "
                           f"{row['ci_high']:.3f}] (N={row['n_sampled']}), population {row['population_value']:.3f} "
                           f"(N={row['n_population']})")
        axis.errorbar(x, value, yerr=[lower, upper], fmt="none", ecolor="black", capsize=2, linewidth=0.8,
                      label="95% interval" if i == 0 else None)
        axis.scatter(x, rows["population_value"].to_numpy(), marker="x", color="black", s=18, zorder=3,
                     label="whole stage" if i == 0 else None)
    axis.set_xticks(range(len(stages)), stages)
    axis.set(ylabel="rate", ylim=(0, 1))
    _title(axis, title, share=0.75)
    handles, labels = axis.get_legend_handles_labels()
    marks = ("95% interval", "whole stage")
    order = [i for i, l in enumerate(labels) if l not in marks] + [i for i, l in enumerate(labels) if l in marks]
    axis.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8, frameon=False,
                loc="center left", bbox_to_anchor=(1.0, 0.5))
    return chart


ZERO_MEAN = 1e-6
"""Largest batch mean advantage, over every step and estimator, read as zero by construction
(group-normalised GRPO advantages, whitened ones): the mean panel is then left out, with a note."""


def _lone_point(points: int) -> dict[str, Any]:
    """A line of one point draws nothing: it gets a marker (a run of one step)."""
    return {"marker": "o", "markersize": 4} if points == 1 else {}


def advantage_batches(diagnostics: pl.DataFrame, title: str, units: Mapping[str, str] | None = None) -> Chart:
    """Per-step advantage mean and std per estimator; all-negative batches marked. When every
    batch mean is zero (:data:`ZERO_MEAN`), only the std is drawn and the title says why. The
    title's N is what one estimator's batches describe (:func:`_described`), as ``units`` names
    it per estimator label (``model tokens``, ``trajectories``: what its loss counts)."""
    zero_mean = diagnostics.height > 0 and float(diagnostics["mean"].abs().max()) <= ZERO_MEAN
    if zero_mean:
        figure, bottom = _figure(height=3.4)
        top = None
    else:
        figure, (top, bottom) = _figure(height=5.5, rows=2)
    chart = Chart(figure)
    if diagnostics.is_empty():
        _no_data(top, title)
        _no_data(bottom, "")
        return chart
    marked = False
    bins = _step_bins(diagnostics["step"])
    steps = diagnostics["step"].unique().sort()
    drawn = diagnostics
    if bins is not None:
        # each bin of consecutive steps drawn at its mean step: mean of the batch means and stds,
        # all-negative when any of its batches is
        drawn = diagnostics.sort("step").with_columns(bins).group_by("estimator", "__bin", maintain_order=True).agg(
            pl.col("step").mean(), pl.col("mean").mean(), pl.col("std").mean(), pl.col("all_negative").any())
    for (estimator,), part in drawn.partition_by("estimator", as_dict=True, maintain_order=True).items():
        part = part.sort("step")
        point = _lone_point(part.height)
        bottom.plot(part["step"], part["std"], label=estimator, linewidth=1, **point)
        if top is None:
            continue
        top.plot(part["step"], part["mean"], label=estimator, linewidth=1, **point)
        negative = part.filter(pl.col("all_negative"))
        if negative.height:
            top.scatter(negative["step"], negative["mean"], color="red", s=14, zorder=3,
                        label="all-negative batch" if not marked else None)
            marked = True
    by_step = diagnostics.sort("step", maintain_order=True)
    starts = by_step.select(pl.col("step").search_sorted(steps, side="left"))["step"].to_list() + [by_step.height]

    def text_of(i: int) -> str:
        rows = by_step.slice(starts[i], starts[i + 1] - starts[i])
        return f"step {steps[i]}: " + "; ".join(
            f"{r['estimator']} mean {r['mean']:+.3f} std {r['std']:.3f}{' all-negative' if r['all_negative'] else ''}"
            for r in rows.iter_rows(named=True))

    first = bottom if top is None else top
    _hover_columns(chart, first, steps.to_list(), text_of, 1.0)
    for axis, column in ((top, "mean"), (bottom, "std")):
        low, high = diagnostics[column].min(), diagnostics[column].max()
        if axis is not None and high - low < MIN_SPAN:
            centre = (high + low) / 2
            axis.set_ylim(centre - MIN_SPAN / 2, centre + MIN_SPAN / 2)
    described = _described(diagnostics, units or {})
    pooled = f", pooled in {MAX_DRAWN_STEPS:,} bins" if bins is not None else ""
    heading = f"{title} ({len(steps)} step{'s' if len(steps) != 1 else ''}{pooled}" + (f", N={described})" if described else ")")
    if top is not None:
        top.axhline(0.0, color="black", linewidth=0.6)
        top.set(ylabel="batch mean advantage")
    else:
        heading += "; batch mean 0 at every step (zero by construction), not drawn"
    _title(first, heading, share=0.75)
    bottom.set(xlabel="training step", ylabel="batch std")
    _integer_steps(bottom, steps.to_list())
    first.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return chart


def _described(diagnostics: pl.DataFrame, units: Mapping[str, str]) -> str | None:
    """What each estimator's batches describe, summed over its steps: "613,137 model tokens" (of
    one estimator, or "per estimator" of several), or "122,906 model tokens or 1,280 trajectories
    per estimator" where estimators count different things. The estimators of a figure describe
    the same trajectories, so their counts are not added up. None without counts."""
    if "count" not in diagnostics.columns or diagnostics.is_empty():
        return None
    totals = diagnostics.group_by("estimator", maintain_order=True).agg(pl.col("count").sum())
    said = dict.fromkeys(f"{int(n):,} {units.get(estimator, 'units')}" for estimator, n in totals.iter_rows() if n)
    if not said:
        return None
    return " or ".join(said) + (" per estimator" if totals.height > 1 else "")


def reward_and_length_by_step(trends: dict[str, Any], title: str) -> Chart:
    """Mean reward and mean model tokens per trajectory (or the logged response length) at each
    step (the trends of :func:`trajlens.report.overview.run_trends`), one panel each."""
    from trajlens.report.overview import LENGTH_TRENDS

    names = [name for name in ("reward", *LENGTH_TRENDS) if name in trends]
    chart, axes = _stacked_panels(len(names), 2.2, 0.6)
    if not names:
        _no_data(axes[0], title)
        return chart
    for axis, name in zip(axes, names):
        steps = [s for s, _ in trends[name].points]
        values = [v for _, v in trends[name].points]
        axis.plot(steps, values, linewidth=1, color="#1565c0", **_lone_point(len(steps)))
        axis.set_ylabel(f"mean {name}")
        _hover_columns(chart, axis, steps, lambda i, s=steps, v=values, n=name: f"step {s[i]}: mean {n} {v[i]:.4g}",
                       1.0)
    axes[0].set_title(title)
    axes[-1].set_xlabel("training step")
    _integer_steps(axes[-1], [s for name in names for s, _ in trends[name].points])
    return chart


def reward_channels_by_step(step_means: pl.DataFrame, rel_gains: pl.DataFrame, title: str) -> Chart:
    """One panel per reward channel: its step mean (solid, left axis) and its rel_gain (dashed,
    right axis: the mean over the step's groups of the channel's max - min in the group, the
    checks' ``rel_gain:<channel>``; at 0 the channel tells no rollout of a group from another) at
    each step. ``step_means``: ``step``, ``channel``, ``mean``
    (:func:`trajlens.run.channels.channel_step_means`); ``rel_gains``: ``step``, ``channel``,
    ``rel_gain`` (:func:`trajlens.checks.step_measures.step_rel_gains`)."""
    channels = step_means["channel"].unique(maintain_order=True).to_list()
    chart, axes = _stacked_panels(len(channels), 1.9, 0.7)
    if not channels:
        _no_data(axes[0], title)
        return chart
    shown: list[Any] = []
    for axis, channel in zip(axes, channels):
        means = step_means.filter(pl.col("channel") == channel).sort("step")
        gains = rel_gains.filter(pl.col("channel") == channel).sort("step")
        steps, values = means["step"].to_list(), means["mean"].to_list()
        (mean_line,) = axis.plot(steps, values, linewidth=1, color="#1565c0", label="step mean", **_lone_point(len(steps)))
        axis.set_ylabel(f"{channel}\nstep mean", color="#1565c0")
        gain_axis = axis.twinx()
        (gain_line,) = gain_axis.plot(gains["step"].to_list(), gains["rel_gain"].to_list(), linewidth=1, linestyle="--",
                                      color="#c62828", label="rel_gain", **_lone_point(gains.height))
        shown = shown or [mean_line, gain_line]
        gain_axis.set_ylabel("rel_gain", color="#c62828")
        gain_axis.set_ylim(bottom=0)
        by_step = dict(zip(gains["step"].to_list(), gains["rel_gain"].to_list()))
        _hover_columns(chart, axis, steps, lambda i, s=steps, v=values, c=channel, g=by_step: (
            f"step {s[i]}: {c} mean {v[i]:.4g}" + (f", rel_gain {g[s[i]]:.3g}" if g.get(s[i]) is not None else "")), 1.0)
    axes[0].set_title(title)
    axes[0].legend(handles=shown, loc="upper right", fontsize="small")
    axes[-1].set_xlabel("training step")
    _integer_steps(axes[-1], step_means["step"].to_list())
    return chart
