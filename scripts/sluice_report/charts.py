"""Interactive charts (plotly), one builder per question the report answers.

A builder returns a Chart, or a sentence saying why it has nothing to draw: a chart is never
drawn empty. Figures are rendered without plotly.js; the page embeds it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import fmt
from .aggregate import Config
from .names import (CEILING, CLIENT_LABELS, CLIENTS, LAW_COLORS, LAW_LABELS, LAWS, PEER, ROLE_COLORS,
                    impl_color, impl_rank, mode_rank, workload_rank)
from .ratios import best_client, peer_vs_sluice, scenario
from .pressure import PressureRun
from .stats import Spread

CONFIG = {"displaylogo": False, "responsive": True,
          "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
FONT = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12)
PERCENTILE_COLORS = {"p50": "#9ecae1", "p90": "#4292c6", "p99": "#08519c", "max": "#08306b"}


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    caption: str
    html: str


@dataclass(frozen=True)
class Omitted:
    title: str
    reason: str


@dataclass
class ChartSet:
    charts: list[Chart]
    omitted: list[Omitted]


# --- shared pieces ------------------------------------------------------------------------


def _layout(fig: go.Figure, height: int, **kw) -> None:
    fig.update_layout(
        template="plotly_white", height=height, font=FONT, barmode=kw.pop("barmode", "group"),
        margin=kw.pop("margin", dict(l=70, r=20, t=60, b=60)), hoverlabel=dict(font_size=12),
        legend=dict(orientation="h", yanchor="bottom", y=1.06, xanchor="left", x=0), **kw)


def _err(s: Spread, scale: float = 1.0) -> dict:
    """Asymmetric min-max error bars around the median."""
    if s.median is None or s.n < 2:
        return dict(type="data", array=[0], arrayminus=[0], visible=False)
    return dict(type="data", symmetric=False, array=[(s.max - s.median) * scale],
                arrayminus=[(s.median - s.min) * scale], thickness=1.2, width=4, color="#333")


def _errs(spreads: list[Spread], scale: float = 1.0) -> dict:
    up, down = [], []
    for s in spreads:
        ok = s.median is not None and s.n >= 2
        up.append((s.max - s.median) * scale if ok else 0)
        down.append((s.median - s.min) * scale if ok else 0)
    return dict(type="data", symmetric=False, array=up, arrayminus=down, thickness=1.2, width=3,
                color="#333", visible=any(up) or any(down))


def _multi_conn(configs: list[Config]) -> set[str]:
    """Workloads run at several connection counts: their labels need the count."""
    seen: dict[str, set[int]] = {}
    for c in configs:
        seen.setdefault(c.workload_label, set()).add(c.connections)
    return {w for w, cs in seen.items() if len(cs) > 1}


def _cat(c: Config, multi: set[str]) -> str:
    w = c.workload_label
    return f"{w} · {c.connections}c" if w in multi else w


def _modes(configs: list[Config]) -> list[str]:
    return sorted({c.mode for c in configs}, key=mode_rank)


def _impls(configs: list[Config]) -> list[str]:
    return sorted({c.implementation for c in configs}, key=impl_rank)


def _runs_note(s: Spread) -> str:
    return fmt.plural(s.n, "ok run")


def _html(fig: go.Figure, cid: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=cid, config=CONFIG)


def _unit_line(fig: go.Figure, y: float, text: str) -> None:
    fig.add_hline(y=y, line=dict(color="#555", width=1, dash="dot"),
                  annotation_text=text, annotation_position="top right",
                  annotation_font=dict(size=10, color="#555"))


def _no_figures(configs: list[Config]) -> str:
    failed = [c.label for c in configs if c.status == "failed" and not c.is_adaptive]
    return f" No bar for {', '.join(failed)}: all runs failed." if failed else ""


def _wl_index(cat: str) -> int:
    return workload_rank(cat.split(" · ")[0])[0]


ROW_PX, GAP_PX, EXTRA_PX = 300, 150, 150
# 1-2-5 ticks, labelled in full, for log axes (plotly's "D2" labels 20 and 50 as "2" and "5").
LOG_TICKS = [m * 10.0**e for e in range(-2, 6) for m in (1, 2, 5)]


def _rows_by_mode(data: list[Config]) -> tuple[go.Figure, list[str], int]:
    """One subplot row per Valkey topology, for charts whose x axis is (workload, implementation).

    The gap is fixed in pixels: two-level category labels need room under each row.
    """
    modes = _modes(data)
    height = EXTRA_PX + ROW_PX * len(modes) + GAP_PX * (len(modes) - 1)
    fig = make_subplots(rows=len(modes), cols=1, subplot_titles=modes,
                        vertical_spacing=GAP_PX / height if len(modes) > 1 else 0.1)
    fig.update_xaxes(tickfont=dict(size=10))
    return fig, modes, height


# Axis labels only; legends, tables and captions keep the full names.
SHORT = {CEILING: "off", **CLIENT_LABELS, PEER: "fastify"}
SHORT_NOTE = "On the axes, " + ", ".join(
    [f"off = {CEILING} (the ceiling)", *(f"{label} = {c}" for c, label in CLIENT_LABELS.items()
                                         if label != c), f"fastify = {PEER}"]) + "."


def _mode_rows(data: list[Config], modes: list[str]):
    """Each mode's row of a figure by mode: its number, its configurations, their x labels."""
    for row, mode in enumerate(modes, 1):
        cs = [c for c in data if c.mode == mode]
        yield row, cs, _multicat(cs)


def _multicat(cs: list[Config]) -> list[list[str]]:
    multi = _multi_conn(cs)
    return [[_cat(c, multi) for c in cs], [SHORT.get(c.implementation, c.implementation) for c in cs]]


# --- builders -------------------------------------------------------------------------------

Built = Union[tuple[str, str, go.Figure], str]


def throughput(configs: list[Config]) -> Built:
    data = [c for c in configs if not c.is_adaptive and c.req.median is not None]
    if not data:
        return "no ok run outside the adaptive scenario"
    multi = _multi_conn(data)
    modes = _modes(data)
    fig = make_subplots(rows=1, cols=len(modes), subplot_titles=modes, shared_yaxes=True,
                        horizontal_spacing=0.04)
    shown: set[str] = set()
    for col, mode in enumerate(modes, 1):
        cats = []
        for impl in _impls(data):
            for c in [c for c in data if c.mode == mode and c.implementation == impl]:
                cats.append(_cat(c, multi))
                hv = bool(c.high_variance)
                fig.add_trace(go.Bar(
                    name=impl, legendgroup=impl, showlegend=impl not in shown,
                    legendrank=100 + impl_rank(impl)[0],
                    x=[_cat(c, multi)], y=[c.req.median], offsetgroup=impl,
                    marker=dict(color=impl_color(impl), pattern_shape="/" if hv else ""),
                    error_y=_err(c.req),
                    customdata=[[fmt.rate(c.req.min), fmt.rate(c.req.max), fmt.rate(c.req.stddev),
                                 fmt.pct(c.req.cv), _runs_note(c.req), c.status]],
                    hovertemplate=(f"<b>{impl}</b> {mode} %{{x}}<br>median %{{y:,.0f}} req/s<br>"
                                   "min–max %{customdata[0]}–%{customdata[1]}, sd %{customdata[2]}"
                                   "<br>CV %{customdata[3]}, %{customdata[4]} (%{customdata[5]})"
                                   "<extra></extra>")), row=1, col=col)
                shown.add(impl)
        order = sorted(set(cats), key=lambda s: (_wl_index(s), s))
        fig.update_xaxes(categoryorder="array", categoryarray=order, row=1, col=col)
    fig.update_yaxes(title_text="responses/s (median, min–max)", row=1, col=1, rangemode="tozero")
    _layout(fig, 460)
    hv = [c.label for c in data if c.high_variance]
    caption = ("Median responses per second over ok runs (responses counted / measured wall time); "
               "whiskers span the lowest and highest run. Hatched bars vary by CV > 10%"
               + (f": {', '.join(hv)}." if hv else " (none here).") + _no_figures(configs))
    return "Throughput per implementation and workload", caption, fig


def latency(configs: list[Config]) -> Built:
    data = [c for c in configs if c.latency.get("p50") and c.latency["p50"].median is not None]
    if not data:
        return "no latency percentiles in the ok runs (adaptive runs have none: their load is paced)"
    fig, modes, height = _rows_by_mode(data)
    for row, cs, x in _mode_rows(data, modes):
        for p in ("p50", "p90", "p99", "max"):
            spreads = [c.latency[p] for c in cs]
            fig.add_trace(go.Bar(
                name=p, legendgroup=p, showlegend=row == 1, x=x,
                y=[s.median for s in spreads], marker_color=PERCENTILE_COLORS[p],
                error_y=_errs(spreads),
                hovertemplate=f"{p} %{{y:,.1f}} ms (median over runs)<br>%{{x}}<extra></extra>"),
                row=row, col=1)
        fig.update_yaxes(type="log", tickvals=LOG_TICKS, ticktext=[f"{v:g}" for v in LOG_TICKS],
                         title_text="ms (log scale)", row=row, col=1)
    _layout(fig, height)
    return ("Latency percentiles", "Median over ok runs of each run's p50, p90, p99 and max "
            "latency, in milliseconds, log scale; whiskers span the runs. Adaptive runs are paced "
            "and have no latency figures. " + SHORT_NOTE, fig)


def rejection(configs: list[Config]) -> Built:
    workloads = {c.workload for c in configs if (c.limited_per_s.median or 0) > 0}
    data = [c for c in configs if c.workload in workloads and c.rejected_share.median is not None
            and not c.is_adaptive]
    if not data:
        return "no 429 response in any ok run outside the adaptive scenario"
    modes = _modes(data)
    # Few bars: topologies side by side keep the chart short.
    fig = make_subplots(rows=1, cols=len(modes), subplot_titles=modes, shared_yaxes=True,
                        horizontal_spacing=0.04)
    for col, mode in enumerate(modes, 1):
        cs = [c for c in data if c.mode == mode]
        fig.add_trace(go.Bar(
            name="429 share", showlegend=False, x=_multicat(cs),
            y=[c.rejected_share.median * 100 for c in cs],
            marker_color=[impl_color(c.implementation) for c in cs],
            error_y=_errs([c.rejected_share for c in cs], 100),
            customdata=[[c.implementation, fmt.rate(c.limited_per_s.median), fmt.rate(c.req.median)]
                        for c in cs],
            hovertemplate=("%{customdata[0]}, %{x}<br>429 share %{y:.1f}%<br>429/s "
                           "%{customdata[1]} of %{customdata[2]} responses/s<extra></extra>")),
            row=1, col=col)
    fig.update_yaxes(title_text="429 / responses (%)", range=[0, 105], row=1, col=1)
    fig.update_xaxes(tickfont=dict(size=10))
    _layout(fig, 400, bargap=0.35)
    return ("Rejection share", "Share of responses that were 429, median over ok runs, for the "
            f"workloads where any 429 was answered ({', '.join(sorted(workloads))}). " + SHORT_NOTE,
            fig)


def _by_role(configs: list[Config], attr: str, scale: float, title: str, unit: str,
             caption: str) -> Built:
    data = [c for c in configs if any(s.median is not None for s in getattr(c, attr).values())]
    if not data:
        return "no process samples in the ok runs"
    roles = sorted({r for c in data for r in getattr(c, attr)},
                   key=lambda r: list(ROLE_COLORS).index(r) if r in ROLE_COLORS else 99)
    fig, modes, height = _rows_by_mode(data)
    for row, mode in enumerate(modes, 1):
        cs = [c for c in data if c.mode == mode]
        for role in roles:
            spreads = [getattr(c, attr).get(role) for c in cs]
            ys = [s.median * scale if s and s.median is not None else None for s in spreads]
            if all(y is None for y in ys):
                continue
            fig.add_trace(go.Bar(
                name=role, legendgroup=role, showlegend=row == 1, x=_multicat(cs), y=ys,
                marker_color=ROLE_COLORS.get(role, "#8c564b"),
                hovertemplate=f"{role}: %{{y:,.0f}} {unit}<br>%{{x}}<extra></extra>"),
                row=row, col=1)
        fig.update_yaxes(title_text=unit, row=row, col=1)
    _layout(fig, height, barmode="stack")
    return title, f"{caption} {SHORT_NOTE}", fig


def cpu(configs: list[Config]) -> Built:
    return _by_role(configs, "cpu", 1.0, "CPU per process role", "% of one core",
                    "Mean CPU over the measured window, median over ok runs, stacked by process "
                    "role and summed over the processes of a role (all Valkey nodes; both "
                    "gateways, and the pressure feed, in the adaptive scenario). 100 = one core "
                    "busy.")


def rss(configs: list[Config]) -> Built:
    return _by_role(configs, "rss", 1 / 2**20, "Resident memory per process role", "MiB",
                    "Mean resident set size (RSS) over the measured window, median over ok runs, "
                    "stacked by process role and summed over the processes of a role.")


def _scen_label(scen: tuple[str, str, int], multi: set[str]) -> str:
    return f"{scen[1]} · {scen[2]}c" if scen[1] in multi else scen[1]


def _scen_x(cs: list[Config]) -> list[list[str]]:
    multi = _multi_conn(cs)
    return [[c.mode for c in cs], [_cat(c, multi) for c in cs]]


def _ratio_bar(impl: str, cs: list[Config], y: list[Optional[float]], of: str,
               **extra: Any) -> go.Bar:
    """One implementation's bars of a ratio per scenario, with its own req/s in the hover."""
    return go.Bar(name=impl, x=_scen_x(cs), y=y, marker_color=impl_color(impl),
                  customdata=[[fmt.rate(c.req.median)] for c in cs],
                  hovertemplate=(f"<b>{impl}</b> %{{x}}<br>%{{y:.2f}} of {of} "
                                 "(%{customdata[0]} req/s)<extra></extra>"), **extra)


def _ratio_axes(fig: go.Figure, unit: str, title: str) -> None:
    """A line at 1 (the baseline), the y title, the chart's size."""
    _unit_line(fig, 1.0, unit)
    fig.update_yaxes(title_text=title, rangemode="tozero")
    _layout(fig, 440)


def quota_ratio(configs: list[Config]) -> Built:
    data = [c for c in configs if c.ratio_vs_quotas_off is not None]
    if not data:
        return f"no {CEILING} configuration next to a quotas-on one"
    fig = go.Figure()
    for impl in _impls(data):
        cs = [c for c in data if c.implementation == impl]
        fig.add_trace(_ratio_bar(impl, cs, [c.ratio_vs_quotas_off for c in cs], "quotas off"))
    _ratio_axes(fig, "quotas off", "req/s ÷ quotas-off req/s")
    return ("Quotas on ÷ quotas off", "Each implementation's median req/s divided by quotas-off's "
            "in the same mode, workload and connections: the share of the ceiling kept with the "
            f"quota check on. {PEER} is a different server, shown for scale.", fig)


def client_vs_client(configs: list[Config]) -> Built:
    data = [c for c in configs if c.ratio_vs_best_client is not None and not c.is_adaptive
            and sum(1 for o in configs if scenario(o) == scenario(c)
                    and o.ratio_vs_best_client is not None) >= 2]
    if not data:
        return "fewer than two sluice clients with figures in any one scenario"
    fig = go.Figure()
    for impl in [i for i in CLIENTS if any(c.implementation == i for c in data)]:
        cs = [c for c in data if c.implementation == impl]
        bests = [best_client(configs, scenario(c)).req.median for c in cs]
        spreads = [c.req for c in cs]
        err = dict(type="data", symmetric=False,
                   array=[(s.max - s.median) / b if s.n >= 2 else 0 for s, b in zip(spreads, bests)],
                   arrayminus=[(s.median - s.min) / b if s.n >= 2 else 0
                               for s, b in zip(spreads, bests)],
                   thickness=1.2, width=3, color="#333")
        fig.add_trace(_ratio_bar(impl, cs, [c.ratio_vs_best_client for c in cs],
                                 "the fastest client", error_y=err))
    _ratio_axes(fig, "fastest client", "req/s ÷ fastest client's")
    return ("Client against client", "Each sluice client's median req/s divided by the fastest "
            "client's in the same mode, workload and connections (1 = fastest). Whiskers: the "
            "client's own lowest and highest run on the same scale; overlapping whiskers mean the "
            "order is within run-to-run noise.", fig)


def peer_chart(configs: list[Config]) -> Built:
    cmps = peer_vs_sluice(configs)
    if not cmps:
        return f"no {PEER} configuration with figures next to a sluice client"
    multi = _multi_conn(configs)
    fig = go.Figure()
    for client in [c for c in CLIENTS if any(p.client == c for p in cmps)]:
        ps = [p for p in cmps if p.client == client]
        fig.add_trace(go.Bar(
            name=f"{PEER} ÷ {client}", x=[[p.scenario[0] for p in ps],
                                           [_scen_label(p.scenario, multi) for p in ps]],
            y=[p.peer_over_client for p in ps], marker_color=impl_color(client),
            customdata=[[fmt.rate(p.peer_req), fmt.rate(p.client_req)] for p in ps],
            hovertemplate=(f"%{{x}}<br>{PEER} %{{customdata[0]}} ÷ {client} %{{customdata[1]}} "
                           "req/s = %{y:.2f}<extra></extra>")))
    _unit_line(fig, 1.0, "equal")
    fig.update_yaxes(title_text=f"{PEER} req/s ÷ sluice client's", rangemode="tozero")
    _layout(fig, 420)
    return ("Peer baseline against sluice", f"The peer ({PEER}, its Redis store through ioredis, "
            "same Valkey) divided by each sluice client, median req/s, same scenario. Below 1: "
            "the sluice client answers more.", fig)


TRIPS_COLOR, EXECUTED_COLOR = "#1f77b4", "#d62728"


def _mix_text(c: Config) -> str:
    mix = sorted(((k, v) for k, v in c.commands_per_request.items() if v >= 0.0005),
                 key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.2f}" for k, v in mix) or "none"


def valkey_round_trips(configs: list[Config]) -> Built:
    data = [c for c in configs if c.round_trips_per_request.median is not None
            or c.cmds_per_request.median is not None]
    if not data:
        return "no Valkey INFO commandstats in the ok runs"
    fig, modes, height = _rows_by_mode(data)
    for row, cs, x in _mode_rows(data, modes):
        detail = [[fmt.num(c.cmds_per_request.median), _mix_text(c), c.implementation,
                   fmt.num(c.round_trips_per_request.median)] for c in cs]
        fig.add_trace(go.Bar(
            name="round trips (script calls)", legendgroup="trips", showlegend=row == 1, x=x,
            y=[c.round_trips_per_request.median for c in cs], marker_color=TRIPS_COLOR,
            error_y=_errs([c.round_trips_per_request for c in cs]), customdata=detail,
            hovertemplate=("<b>%{customdata[2]}</b> %{x}<br>%{y:.3f} round trips per response"
                           "<br>%{customdata[0]} commands executed: %{customdata[1]}"
                           "<extra></extra>")), row=row, col=1)
        fig.add_trace(go.Scatter(
            name="commands executed inside Valkey", legendgroup="executed", showlegend=row == 1,
            x=x, y=[c.cmds_per_request.median for c in cs], mode="markers",
            marker=dict(symbol="line-ew", size=22, line=dict(width=3, color=EXECUTED_COLOR),
                        color=EXECUTED_COLOR),
            customdata=detail,
            hovertemplate=("<b>%{customdata[2]}</b> %{x}<br>%{y:.3f} commands executed per "
                           "response: %{customdata[1]}<br>%{customdata[3]} round trips"
                           "<extra></extra>")), row=row, col=1)
        fig.update_yaxes(title_text="per response", rangemode="tozero", row=row, col=1)
    _layout(fig, height)
    caption = ("Bars: round trips to Valkey per response, that is script calls (EVAL, EVALSHA "
               "or FCALL, each carrying one whole quota check) / responses, median over ok runs, "
               "whiskers over the runs. Red ticks: commands Valkey executed per response (INFO "
               "commandstats on every primary, after minus before, replication left out), which "
               "also counts what the script runs inside Valkey; hover for the commands. "
               f"{CEILING} sends none by design; under flood the in-memory block answers known "
               "over-limit clients without Valkey, so fewer than one. A little above 1 comes "
               "from the window's edges: Valkey's counters and the responses are not counted "
               "at the same instant. ")
    return "Valkey round trips per response", caption + SHORT_NOTE, fig


def adaptive_series(configs: list[Config]) -> Built:
    cfgs = [c for c in configs if c.is_adaptive and c.representative_run() is not None]
    if not cfgs:
        return "no adaptive run with a time series"
    cfgs.sort(key=lambda c: (mode_rank(c.mode), LAWS.index(c.law) if c.law in LAWS else 9))
    several = len({(c.mode, c.connections, c.implementation) for c in cfgs}) > 1
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=("u = relay memory / target", "m = multiplier applied",
                                        "admitted writes/s"))
    notes, calm = [], None
    for c in cfgs:
        r = c.representative_run()
        ts = r.timeseries
        law = c.law or c.workload
        name = LAW_LABELS.get(law, law) + (f" ({c.mode}, {c.implementation})" if several else "")
        color = LAW_COLORS.get(law, impl_color(law))
        for row, key in ((1, "u"), (2, "m"), (3, "admittedPerSec")):
            if key not in ts:
                continue
            fig.add_trace(go.Scatter(
                name=name, legendgroup=name, showlegend=row == 1, x=ts["t"], y=ts[key],
                mode="lines", line=dict(color=color, width=1.6),
                hovertemplate=f"{name}<br>t %{{x:.2f}} s<br>{key} %{{y:.3f}}<extra></extra>"),
                row=row, col=1)
        modes = ts.get("mode")
        if modes and "u" in ts and "emergency" in modes:
            # A wide translucent band over the u line while the relay was in emergency mode.
            fig.add_trace(go.Scatter(
                name=f"{name}: in emergency", legendgroup=name, showlegend=True, x=ts["t"],
                y=[u if m == "emergency" else None for u, m in zip(ts["u"], modes)],
                mode="lines", line=dict(color=color, width=9), opacity=0.3, connectgaps=False,
                hovertemplate="emergency at %{x:.2f} s<extra></extra>"), row=1, col=1)
        calm = calm if calm is not None else (r.adaptive or {}).get("calmSec")
        notes.append(f"{name}: run {r.run} of {len(c.ok)} ok")
    fig.add_hline(y=1.0, line=dict(color="#555", width=1, dash="dot"), row=1, col=1,
                  annotation_text="target", annotation_position="top left",
                  annotation_font=dict(size=10, color="#555"))
    if isinstance(calm, (int, float)):
        fig.add_vline(x=calm, line=dict(color="#999", width=1, dash="dash"))
    fig.update_xaxes(title_text="seconds since start", row=3, col=1)
    fig.update_yaxes(title_text="u", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="m", row=2, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="writes/s", row=3, col=1, rangemode="tozero")
    _layout(fig, 760)
    caption = ("A calm phase, then a write flood (dashed line) at several times the relay's drain. "
               "u above 1 is memory over target; a wide pale band over a line marks time in emergency mode. For "
               "each law the ok run with the median peak u is drawn (" + "; ".join(notes) + ").")
    return "Adaptive scenario over time", caption, fig


BUILDERS: tuple[tuple[str, str, Callable[[list[Config]], Built]], ...] = (
    ("throughput", "Throughput per implementation and workload", throughput),
    ("latency", "Latency percentiles", latency),
    ("rejection", "Rejection share", rejection),
    ("cpu", "CPU per process role", cpu),
    ("rss", "Resident memory per process role", rss),
    ("quota-ratio", "Quotas on ÷ quotas off", quota_ratio),
    ("client-vs-client", "Client against client", client_vs_client),
    ("peer", "Peer baseline against sluice", peer_chart),
    ("valkey-round-trips", "Valkey round trips per response", valkey_round_trips),
    ("adaptive", "Adaptive scenario over time", adaptive_series),
)


NODE_COLORS = ("#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#8c564b")
PRESSURE_TITLE = "Memory / target and m over time"


def pressure_run(run: PressureRun) -> Built:
    """One closed-loop run (an OOM arm, a spike arm, a fleet's routing mode, a step): per node,
    u = memory / target above and the multiplier m below, the target line at 1."""
    if not run.drawable:
        return run.why_none or "no samples"
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        row_heights=[0.6, 0.4],
                        subplot_titles=("u = memory / target", "m = multiplier applied"))
    for i, node in enumerate(run.nodes):
        color = NODE_COLORS[i % len(NODE_COLORS)]
        for row, ys, key in ((1, node.u, "u"), (2, node.m, "m")):
            fig.add_trace(go.Scatter(
                name=node.name, legendgroup=node.name, showlegend=row == 1, x=node.t, y=ys,
                mode="lines", line=dict(color=color, width=1.6, shape="hv" if key == "m" else
                                        "linear"),
                hovertemplate=f"{node.name}<br>t %{{x:.2f}} s<br>{key} %{{y:.3f}}<extra></extra>"),
                row=row, col=1)
    fig.add_hline(y=1.0, line=dict(color="#222", width=1.4, dash="dash"), row=1, col=1,
                  annotation_text="target", annotation_position="top left",
                  annotation_font=dict(size=10, color="#222"))
    for t, text in run.marks:
        fig.add_vline(x=t, line=dict(color="#888", width=1, dash="dot"))
        fig.add_annotation(x=t, y=1.0, yref="paper", text=text, showarrow=False,
                           xanchor="left", yanchor="bottom", font=dict(size=10, color="#555"))
    peak = max((u for n in run.nodes for u in n.u if u is not None), default=1.0)
    fig.update_yaxes(title_text="u", row=1, col=1, range=[0, max(1.1, peak * 1.05)])
    fig.update_yaxes(title_text="m", row=2, col=1, range=[-0.02, 1.05])
    fig.update_xaxes(title_text="seconds", row=2, col=1)
    _layout(fig, 440, margin=dict(l=70, r=20, t=80, b=50))
    over = [n.name for n in run.nodes if any(u is not None and u > 1 for u in n.u)]
    verdict = (f"Over target: {', '.join(over)} (peak {peak:.2f} x)." if over
               else f"Never over target (peak {peak:.2f} x).")
    caption = (f"From {run.file}. Memory / target (the dashed black line is the target) and the "
               "multiplier a gateway applied, per node; dotted lines mark the disturbances. "
               + verdict + (f" {run.note[0].upper()}{run.note[1:]}." if run.note else ""))
    return f"{PRESSURE_TITLE}: {run.title}", caption, fig


def pressure_charts(runs: list[PressureRun]) -> ChartSet:
    """One chart per closed-loop run; a run with nothing to draw is listed with the reason."""
    charts, omitted = [], []
    for i, run in enumerate(runs, 1):
        built = pressure_run(run)
        if isinstance(built, str):
            omitted.append(Omitted(f"{PRESSURE_TITLE}: {run.title} ({run.file})", built))
            continue
        title, caption, fig = built
        cid = f"chart-pressure-{i}"
        charts.append(Chart(cid, title, caption, _html(fig, cid)))
    return ChartSet(charts, omitted)


def build_charts(configs: list[Config],
                 only: Optional[list[str]] = None) -> ChartSet:
    charts, omitted = [], []
    for cid, title, builder in BUILDERS:
        if only is not None and cid not in only:
            continue
        built = builder(configs)
        if isinstance(built, str):
            omitted.append(Omitted(title, built))
            continue
        title, caption, fig = built
        charts.append(Chart(f"chart-{cid}", title, caption, _html(fig, f"chart-{cid}")))
    return ChartSet(charts, omitted)
