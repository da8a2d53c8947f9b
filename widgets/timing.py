"""Where each rank's epoch time goes: the seconds of each phase of its steps, stacked per rank and epoch.

Reads a run's :class:`~workbench.events.StepTimes` events (one per rank and epoch: the exclusive seconds of
each phase of :data:`~workbench.events.STEP_PHASES`, summed over the epoch's steps). On top, the share of
each phase in the run's time (all ranks, all epochs), largest first, and the dominant phase. Below, one
stacked bar per rank and epoch, grouped by rank (rank 0's epochs, then rank 1's, ...); each phase has one
colour (:data:`PHASE_COLORS`: the same in every redraw and every run) and one legend entry, listed in the
order of the stack from top to bottom. Hovering a bar segment tells its rank, epoch, phase, seconds and
share of that epoch.

Overlapped work: the seconds a rank's background thread spent off the critical path (the mini-batch trainer's
``train.batches_ahead`` thread sampling and pulling features: :class:`~workbench.events.StepTimes` ``overlapped``)
add nothing to the epoch's time, so they are in no share and not in the epoch's stack: where a run has them, each
epoch's bar is narrowed and a second, slim bar beside it stacks them in pale colours (``sample ahead``, ``fetch
ahead``; :data:`AHEAD_COLORS`), so the eye compares the work taken off the critical path with the epoch it ran
beside. The line above the bars says how much the latest epoch had, beside the ``sample`` wait left on the
critical path.

Long runs: the bars cover the latest ``last_epochs`` epochs; when that makes more than :data:`MAX_BARS`
bars over all ranks, consecutive epochs are grouped into buckets and each bar is the mean epoch of its
bucket (the title says the bucket width). The shares always cover the whole run.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = TimingView(fabricate_run(num_parts=2, epochs=4, step_times=True))
    >>> shares = view.share_percents()           # whole percents, largest remainder: they sum to 100
    >>> sum(shares.values()), max(shares, key=shares.get), shares["fetch"]
    (100, 'fetch', 28)
    >>> cached = TimingView(fabricate_run(num_parts=2, epochs=4, step_times=True, cache="degree"))
    >>> max(cached.shares(), key=cached.shares().get)   # a feature cache halves the fetches
    'forward'
"""

from __future__ import annotations

import html
from typing import Optional

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from widgets.base import PLOT_OPTS, StoreView, empty_note
from widgets.live_plots import LivePlot
from workbench.events import OVERLAP_PHASES, STEP_PHASES

__all__ = ["TimingView", "PHASE_COLORS", "AHEAD_COLORS", "MAX_BARS", "largest_remainder", "format_seconds"]

#: colour of each phase: loading in yellow and orange, compute in blues, communication in red and purple
PHASE_COLORS = {"sample": "#edc948", "fetch": "#f28e2b", "forward": "#4e79a7", "exchange": "#e15759",
                "backward": "#a0cbe8", "grad_sync": "#b07aa1", "optimizer": "#59a14f", "evaluate": "#76b7b2",
                "other": "#bab0ac"}
#: the slim bar of work overlapped off the critical path: each phase's colour, paler
AHEAD_COLORS = {f"{p} ahead": c for p, c in (("sample", "#f7e4a3"), ("fetch", "#f9c89b"))}
#: most bars the figure draws over all ranks (about 8 px each on a laptop screen); more epochs are bucketed
MAX_BARS = 160
#: most epoch labels on the x axis
_MAX_TICKS = 36
#: most ranks whose groups are headed "rank r" (more: the number only)
_MAX_RANK_NAMES = 12
_HOVER = [("rank", "@rank"), ("epoch", "@epochs"), ("phase", "@phase"), ("time", "@time_text"),
          ("share of the epoch", "@share{0.0 %}")]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_seconds(s: float) -> str:
    """``s`` seconds as a short text.

    Example:
        >>> format_seconds(1.234), format_seconds(0.0456), format_seconds(0.000789)
        ('1.23 s', '45.6 ms', '789 µs')
    """
    s = float(s)
    if abs(s) >= 1 or s == 0:
        return f"{s:.3g} s"
    return f"{s * 1e3:.3g} ms" if abs(s) >= 1e-3 else f"{s * 1e6:.3g} µs"


def phase_color(phase: str) -> str:
    return PHASE_COLORS.get(phase) or AHEAD_COLORS.get(phase, "#7f7f7f")


def largest_remainder(fractions: dict[str, float], total: int = 100) -> dict[str, int]:
    """Whole percents of ``fractions`` (which sum to 1) that sum to exactly ``total``: each is rounded down,
    and the points left go to the largest remainders.

    Example:
        >>> largest_remainder({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
        {'a': 34, 'b': 33, 'c': 33}
    """
    if not fractions:
        return {}
    raw = {k: v * total for k, v in fractions.items()}
    out = {k: int(np.floor(v)) for k, v in raw.items()}
    left = total - sum(out.values())
    for k in sorted(raw, key=lambda k: raw[k] - out[k], reverse=True)[:max(left, 0)]:
        out[k] += 1
    return out


class TimingView(StoreView):
    """Seconds of each phase per rank and epoch, stacked, and each phase's share of the run (module docstring)."""

    kinds = ("step_times",)
    title = "Time"

    last_epochs = param.Selector(default=30, objects=[10, 30, 60, 120, 0],
                                 doc="How many of the latest epochs the bars show (0: all, bucketed when many).")

    def _build(self) -> list:
        window = pn.widgets.Select.from_param(self.param.last_epochs, label="Epochs shown", width=160, margin=(4, 10),
                                              options={"last 10": 10, "last 30": 30, "last 60": 60, "last 120": 120,
                                                       "all": 0})
        self._note = empty_note("No step times yet (a trainer reports where each rank's epoch went, once per epoch).")
        # level with the selector's box, below its label
        self._stats = pn.pane.HTML("", margin=(27, 10, 4, 10), css_classes=["wb-time-stats"], disable_math=True)
        self._shares = pn.pane.HTML("", margin=(0, 10, 4, 10), sizing_mode="stretch_width",
                                    css_classes=["wb-time-shares"], disable_math=True)
        self._bars = LivePlot(linked_axes=False)
        return [pn.Row(window, self._stats), self._shares, self._note, self._bars.pane]

    # -- data ---------------------------------------------------------------------------------------------
    def epoch_frame(self) -> pd.DataFrame:
        """One row per rank and epoch: ``steps``, ``wall_s``, the seconds of each phase and their ``total``, and the
        seconds overlapped off the critical path (``overlapped_sample``, ``overlapped_fetch``; in no ``total``)."""
        df = self.store.frame("step_times")
        over = [f"overlapped_{p}" for p in OVERLAP_PHASES]
        cols = ["rank", "epoch", "steps", "wall_s", *STEP_PHASES, "total", *over]
        if df.empty:
            return pd.DataFrame(columns=cols)
        # one event per rank and epoch; a trainer that reports an epoch in several parts is summed
        if df.duplicated(["rank", "epoch"]).any():
            df = df.groupby(["rank", "epoch"], as_index=False)[["steps", "wall_s", *STEP_PHASES, *over]].sum()
        df = df.sort_values(["rank", "epoch"], kind="stable").reset_index(drop=True)
        df = df.assign(total=df[list(STEP_PHASES)].sum(axis=1))
        return df[cols]

    def shares(self) -> dict[str, float]:
        """Each phase's share of the run's time (seconds over all ranks and epochs); they sum to 1 ({} when no
        time was reported)."""
        df = self.store.frame("step_times")
        sums = df[list(STEP_PHASES)].astype(float).sum() if len(df) else pd.Series(0.0, index=list(STEP_PHASES))
        total = float(sums.sum())
        return {p: float(sums[p]) / total for p in STEP_PHASES} if total > 0 else {}

    def share_percents(self) -> dict[str, int]:
        """:meth:`shares` in whole percents that sum to 100 (:func:`largest_remainder`)."""
        return largest_remainder(self.shares())

    def window(self, df: Optional[pd.DataFrame] = None) -> tuple[int, int]:
        """``(first, last)`` epoch of the bars: the latest ``last_epochs`` (all when 0); ``(0, 0)`` when empty."""
        df = self.epoch_frame() if df is None else df
        if df.empty:
            return 0, 0
        last, first = int(df["epoch"].max()), int(df["epoch"].min())
        return (max(first, last - int(self.last_epochs) + 1) if self.last_epochs else first), last

    def bar_frame(self, df: Optional[pd.DataFrame] = None) -> tuple[pd.DataFrame, int]:
        """``(segments, bucket)``: one row per rank, bar and phase of the window, with its rectangle (``x0``,
        ``x1``, ``y0``, ``y1``: bars grouped by rank, phases stacked in :data:`STEP_PHASES` order; where the window
        has overlapped work, also the phases of :data:`AHEAD_COLORS` in a slim bar beside each epoch's) and hover
        fields; ``bucket`` epochs per bar (a bar of a bucket is its mean epoch; ``epoch`` is the first epoch of
        the bucket in the window, buckets start at multiples of ``bucket``)."""
        df = self.epoch_frame() if df is None else df
        cols = ["rank", "epoch", "epochs", "phase", "seconds", "share", "slot", "x", "x0", "x1", "y0", "y1"]
        if df.empty:
            return pd.DataFrame(columns=cols), 1
        first, last = self.window(df)
        df = df[df["epoch"] >= first]
        ranks = sorted(int(r) for r in df["rank"].unique())
        per_rank = max(1, MAX_BARS // len(ranks))
        bucket = max(1, -(-(last - first + 1) // per_rank))   # ceil
        # buckets start at multiples of their width: a bar keeps its epochs while the window slides
        start = df["epoch"].to_numpy() // bucket * bucket
        df = df.assign(slot=(start - first // bucket * bucket) // bucket, epoch=np.maximum(start, first),
                       end=np.minimum(start + bucket - 1, last))
        over = [f"overlapped_{p}" for p in OVERLAP_PHASES]
        if bucket > 1:
            df = df.groupby(["rank", "slot", "epoch", "end"], as_index=False)[[*STEP_PHASES, "total", *over]].mean()
        num_slots = last // bucket - first // bucket + 1
        group = {r: i for i, r in enumerate(ranks)}
        x = df["rank"].map(group).to_numpy() * (num_slots + 1) + df["slot"].to_numpy()   # a gap between ranks
        values = df[list(STEP_PHASES)].to_numpy(dtype=float)                               # (bars, phases)
        totals = df["total"].to_numpy(dtype=float)
        epochs = [str(a) if a == b else f"{a}–{b}" for a, b in zip(df["epoch"], df["end"])]
        ahead = df[over].to_numpy(dtype=float)
        slim = bool((ahead > 0).any())   # a run with overlapped work: the epoch's bar narrowed, a slim bar beside it
        stacks = [(STEP_PHASES, values, x - 0.4, x + (0.12 if slim else 0.4))]
        if slim:
            stacks.append((tuple(AHEAD_COLORS), ahead, x + 0.17, x + 0.4))
        parts = []
        for phases, vals, x0, x1 in stacks:
            tops = np.cumsum(vals, axis=1)
            for i, phase in enumerate(phases):
                share = np.divide(vals[:, i], totals, out=np.zeros(len(df)), where=totals > 0)
                parts.append(pd.DataFrame({
                    "rank": df["rank"].to_numpy(), "epoch": df["epoch"].to_numpy(), "epochs": epochs, "phase": phase,
                    "seconds": vals[:, i], "share": share, "slot": df["slot"].to_numpy(), "x": x, "x0": x0,
                    "x1": x1, "y0": tops[:, i] - vals[:, i], "y1": tops[:, i]}))
        return pd.concat(parts, ignore_index=True)[cols], bucket

    # -- rendering ----------------------------------------------------------------------------------------
    def _figure(self, segments: pd.DataFrame, bucket: int) -> tuple[hv.Overlay, tuple]:
        ranks = sorted(int(r) for r in segments["rank"].unique())
        top = float(segments["y1"].max()) if len(segments) else 1.0
        top = top if top > 0 else 1.0
        # a fast run's epochs take milliseconds: its axis in ms (ticks like 0.002 s are hard to read)
        unit, scale = ("s", 1.0) if top >= 1 else ("ms", 1e3)
        segments = segments.assign(y0=segments["y0"] * scale, y1=segments["y1"] * scale,
                                   time_text=[format_seconds(v) for v in segments["seconds"]])
        top *= scale
        vdims = ["rank", "epochs", "phase", hv.Dimension("seconds"), hv.Dimension("share"), "time_text"]
        layers = []
        present = set(segments["phase"])
        for phase in [*reversed(STEP_PHASES), *(p for p in reversed(AHEAD_COLORS) if p in present)]:
            part = segments[segments["phase"] == phase]   # the legend lists each stack from top to bottom
            rect = hv.Rectangles(part, kdims=["x0", "y0", "x1", "y1"], vdims=vdims, label=phase)
            layers.append(rect.opts(color=phase_color(phase), line_color="white", line_width=0.5, tools=["hover"],
                                    hover_tooltips=_HOVER))
        one = segments[segments["phase"] == STEP_PHASES[0]]   # one row per bar
        centres = one.groupby("rank")["x"].agg(["min", "max"]).mean(axis=1)
        if len(ranks) > 1:   # the name of each group above it, a faint line between groups
            many = len(ranks) > _MAX_RANK_NAMES   # narrow groups: the number only
            layers.append(hv.Labels(pd.DataFrame({"x": centres.to_numpy(), "y": top * 1.08,
                                                  "text": [str(r) if many else f"rank {r}" for r in centres.index]}),
                                    ["x", "y"], "text").opts(text_font_size="8pt" if many else "11pt",
                                                             text_color="#333", text_font_style="bold"))
            gaps = (one.groupby("rank")["x"].min().to_numpy() - 1.0)[1:]
            layers.append(hv.VLines(gaps).opts(color="#999", line_dash="dotted", line_width=1))
        stride = max(1, -(-len(one) // _MAX_TICKS))   # label every stride-th bar of each rank
        ticks = one[one["slot"] % stride == 0]
        epoch_ticks = [(float(x), str(int(e))) for x, e in zip(ticks["x"], ticks["epoch"])]
        title = (f"Time per phase, rank {ranks[0]}" if len(ranks) == 1 else
                 f"Time per phase, per rank and epoch ({len(ranks)} ranks)")
        if bucket > 1:
            title += f": each bar the mean epoch of {bucket}"
        xmin, xmax = float(one["x"].min()) - 0.6, float(one["x"].max()) + 0.6
        overlay = hv.Overlay(layers).opts(
            title=title, legend_position="right", ylabel=f"{'seconds' if unit == 's' else 'ms'} per epoch",
            xlabel="epoch" if len(ranks) == 1 else "epoch (grouped by rank)", xticks=epoch_ticks,
            xlim=(xmin, xmax), ylim=(0, top * 1.16), show_grid=False, **{**PLOT_OPTS, "height": 320})
        return overlay, (tuple(ranks), unit)

    def _update(self) -> None:
        df = self.epoch_frame()
        self._note.visible = df.empty
        self._bars.visible = not df.empty
        if df.empty:
            self._stats.object = self._shares.object = ""
            return
        self._shares.object = self._share_html(df)
        self._stats.object = self._stats_html(df)
        segments, bucket = self.bar_frame(df)
        element, shape = self._figure(segments, bucket)
        self._bars.show(element, shape=shape)

    def _share_html(self, df: pd.DataFrame) -> str:
        shares, percents = self.shares(), self.share_percents()
        if not shares:
            return ""
        items = []
        for phase in sorted(shares, key=shares.get, reverse=True):
            if shares[phase] <= 0:
                continue
            pct = f"{percents[phase]} %" if percents[phase] else "&lt;1 %"
            items.append(f"<span class='wb-time-share' data-phase='{html.escape(phase, quote=True)}' "
                         f"style='white-space:nowrap;margin-right:14px'><span style='display:inline-block;width:11px;"
                         f"height:11px;border-radius:2px;vertical-align:-1px;background:{phase_color(phase)}'></span> "
                         f"{html.escape(phase)} <b>{pct}</b></span>")
        ranks, epochs = int(df["rank"].nunique()), int(df["epoch"].nunique())
        return (f"<div style='color:#333;line-height:1.9'><span style='color:#666;margin-right:10px'>Share of the "
                f"run's time ({_plural(ranks, 'rank')}, {_plural(epochs, 'epoch')}):</span>{''.join(items)}</div>")

    def _stats_html(self, df: pd.DataFrame) -> str:
        last = int(df.groupby("rank")["epoch"].max().min())   # the latest epoch every rank has reported
        recent = df[df["epoch"] == last]
        if recent.empty:   # a rank skipped that epoch
            last = int(df["epoch"].max())
            recent = df[df["epoch"] == last]
        shares = self.shares()
        parts = []
        if shares:
            dominant = max(shares, key=shares.get)
            parts.append(f"most time: <b class='wb-time-dominant'>{html.escape(dominant)}</b> "
                         f"({self.share_percents()[dominant]} %)")
        steps = int(recent["steps"].max())
        mean = float(recent["total"].mean())
        per_step = f", {format_seconds(mean / steps)} per step" if steps else ""
        ranks = len(recent)
        parts.append(f"epoch <b>{last}</b>: <b>{format_seconds(mean)}</b>{' per rank' if ranks > 1 else ''}{per_step}")
        over = {p: float(recent[f"overlapped_{p}"].mean()) for p in OVERLAP_PHASES}
        if sum(over.values()) > 0:
            parts.append(f"<span class='wb-time-overlapped'>off the critical path: <b>{format_seconds(sum(over.values()))}"
                         f"</b> ({', '.join(f'{p} {format_seconds(s)}' for p, s in over.items() if s)}; waited for: "
                         f"sample {format_seconds(float(recent['sample'].mean()))})</span>")
        if ranks > 1:
            slow = recent.loc[recent["total"].idxmax()]
            phase = max(STEP_PHASES, key=lambda p: float(slow[p]))
            parts.append(f"slowest rank <b>{int(slow['rank'])}</b> ({format_seconds(slow['total'])}, most in "
                         f"{html.escape(phase)})")
        return f"<span style='color:#444'>{' · '.join(parts)}</span>"
