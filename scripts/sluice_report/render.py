"""report.html: one self-contained file (plotly.js inline once, no network), from a template."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import plotly
import plotly.offline
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from . import fmt
from .aggregate import Config
from .charts import ChartSet
from .columns import COLUMNS
from .findings import TOPICS, Finding
from .header import Header
from .headline import CpuCost, Headline, Ratio
from .load import Run, Unreadable
from .names import LAW_LABELS, MODES, is_adaptive, is_leased, mode_rank, plain_of
from .ratios import find, scenario
from .stats import HIGH_CV, Spread

TEMPLATES = Path(__file__).resolve().parent / "templates"


@dataclass
class Cell:
    text: str
    title: str = ""
    cls: str = ""


def _range(s: Spread, f=fmt.rate) -> str:
    return fmt.DASH if s.n < 2 else f"{f(s.min)}–{f(s.max)}"


def _row_cls(c: Config) -> str:
    return {"failed": "failed", "partial": "partial"}.get(c.status, "")


def _status(c: Config) -> Cell:
    return Cell(c.status, cls=f"status-{c.status}")


def _ok_runs(c: Config) -> Cell:
    return Cell(f"{len(c.ok)}/{len(c.runs)}", title=f"{len(c.failed)} failed")


def _front_cpu(c: Config) -> Cell:
    for role in ("gateway", "peer"):
        s = c.cpu.get(role)
        if s is not None and s.median is not None:
            return Cell(fmt.cpu(s.median) + (" (peer)" if role == "peer" else ""),
                        title=f"{role} CPU, {_range(s, fmt.cpu)} over runs")
    return Cell(fmt.DASH)


def _trips_title(c: Config) -> str:
    if c.round_trips_per_request.median is None:
        return ("not recorded: run files from before valkey.scriptCalls"
                if c.cmds_per_request.median is not None else "")
    s = c.round_trips_per_request
    return f"{_range(s, fmt.num)} over runs" if s.n >= 2 else ""


def summary_rows(configs: list[Config]) -> list[dict[str, Any]]:
    rows = []
    for c in configs:
        lat = {p: c.latency.get(p) for p in ("p50", "p90", "p99", "max")}
        cv_cls = "warn" if c.high_variance else ""
        rows.append({
            "cls": _row_cls(c),
            "cells": [
                Cell(c.implementation, cls="name"),
                Cell(c.workload_label
                     + ("" if c.in_memory_block is not False else " (no block)")),
                Cell(str(c.connections)),
                _ok_runs(c),
                Cell(fmt.rate(c.req.median), cls="strong"),
                Cell(_range(c.req)),
                Cell(fmt.rate(c.req.stddev)),
                Cell(fmt.pct(c.req.cv) + (" ⚠" if c.high_variance else ""), cls=cv_cls,
                     title="CV > 10%: high variance" if c.high_variance else ""),
                Cell(fmt.rate(c.ok_per_s.median)),
                Cell(fmt.rate(c.limited_per_s.median)),
                Cell(fmt.rate(c.errors_per_s.median),
                     cls="warn" if c.errors_per_s.median else ""),
                Cell(fmt.pct(c.rejected_share.median)),
                *[Cell(fmt.ms(s.median if s else None),
                       title=f"{_range(s, fmt.ms)} ms over runs" if s else "") for s in lat.values()],
                _front_cpu(c),
                Cell(fmt.cpu(c.cpu["valkey"].median) if "valkey" in c.cpu else fmt.DASH),
                Cell(fmt.num(c.round_trips_per_request.median),
                     title=_trips_title(c)),
                Cell(fmt.num(c.cmds_per_request.median), cls="muted"),
                Cell(fmt.ratio(c.ratio_vs_quotas_off)),
                Cell(fmt.ratio(c.ratio_vs_peer)),
                _status(c),
            ],
        })
    return rows


SUMMARY_HEAD = [
    ("implementation", ""), ("workload", ""), ("conn.", "concurrent connections"),
    ("ok/runs", "ok runs / run files"), ("req/s", "median responses per second over ok runs"),
    ("min–max", "lowest and highest run, req/s"), ("sd", "sample standard deviation, req/s"),
    ("CV", "stddev / mean; ⚠ above 10%"), ("2xx/s", ""), ("429/s", ""),
    ("errors/s", "connection errors and timeouts per second"), ("429 share", "429 / responses"),
    ("p50 ms", ""), ("p90 ms", ""), ("p99 ms", ""), ("max ms", ""),
    ("gateway CPU %", "100 = one core"), ("Valkey CPU %", "summed over nodes; 100 = one core"),
    ("Valkey trips/ resp.", "round trips to Valkey per response: script calls (EVAL, EVALSHA, "
     "FCALL), each carrying one quota check"),
    ("cmds/ resp.", "commands Valkey executed per response, those a script runs inside Valkey "
     "included"),
    ("×\u00a0quotas off", "req/s ÷ quotas-off req/s (see also the charts)"),
    ("×\u00a0peer", "req/s ÷ fastify-rate-limit's; above 1, sluice answers more"),
    ("status", "ok, partial (some runs failed) or failed"),
]


def _med_range(s: Optional[Spread], f) -> str:
    if s is None or s.median is None:
        return fmt.DASH
    # A range that reads as one figure is left out ("2.0% (2.0%–2.0%)" says nothing).
    return f(s.median) + (f" ({f(s.min)}–{f(s.max)})" if s.n >= 2 and f(s.min) != f(s.max)
                          else "")


def adaptive_rows(configs: list[Config]) -> list[dict[str, Any]]:
    rows = []
    for c in configs:
        if not c.is_adaptive:
            continue
        a = c.adaptive
        rows.append({
            "cls": _row_cls(c),
            "cells": [
                Cell(LAW_LABELS.get(c.law or "", c.workload), cls="name"),
                Cell(c.mode), Cell(c.implementation),
                _ok_runs(c),
                Cell(_med_range(a["peakUOverTarget"], fmt.ratio), cls="strong"),
                Cell(_med_range(a["secondsAboveTarget"], fmt.seconds)),
                Cell(_med_range(a["emergencyEntries"], fmt.count)),
                Cell(_med_range(a["acceptedShareOfSustainable"], fmt.ratio)),
                Cell(_med_range(a["mPeakToPeak"], fmt.ratio)),
                Cell(_med_range(a["uPeakToPeak"], fmt.ratio)),
                Cell(f"{fmt.ms(a['propagationP50Ms'].median)} / {fmt.ms(a['propagationP99Ms'].median)}"),
                Cell(fmt.rate(c.ok_per_s.median)),
                _status(c),
            ],
        })
    return rows


ADAPTIVE_HEAD = [
    ("law", ""), ("mode", ""), ("gateways' client", ""), ("ok/runs", ""),
    ("peak memory / target", "median (min–max)"), ("s above target", ""),
    ("emergency entries", ""), ("admitted / sustainable", ""), ("m peak-to-peak", ""),
    ("u peak-to-peak", ""), ("propagation p50 / p99 ms", ""), ("2xx/s", "admitted writes per second"),
    ("status", ""),
]


def _over_admitted(c: Config) -> Cell:
    n = c.lease_over_admitted
    if n is None:
        return Cell(fmt.DASH, title="no lease accounting in these runs")
    if n:
        return Cell(f"{n:,} ⚠", cls="bad", title="writes admitted beyond the points Valkey "
                                                  "granted: must be 0")
    return Cell("0", cls="good")


def lease_rows(configs: list[Config]) -> list[dict[str, Any]]:
    """One row per +lease configuration, its plain client's round trips beside its own."""
    rows = []
    for c in configs:
        if not is_leased(c.implementation):
            continue
        plain = find(configs, plain_of(c.implementation), scenario(c), c.duration_s)
        plain_trips = plain.round_trips_per_request.median if plain else None
        rows.append({
            "cls": _row_cls(c),
            "cells": [
                Cell(c.implementation, cls="name"), Cell(c.mode), Cell(c.workload_label),
                Cell(str(c.connections)),
                _ok_runs(c),
                Cell(fmt.rate(c.req.median), cls="strong"),
                Cell(fmt.ratio(c.ratio_vs_quotas_off)),
                Cell(fmt.ratio(c.ratio_vs_peer)),
                Cell(fmt.num(c.round_trips_per_request.median), title=_trips_title(c)),
                Cell(fmt.num(plain_trips), cls="muted",
                     title=f"{plain_of(c.implementation)}, same scenario" if plain
                     else f"no {plain_of(c.implementation)} runs in this scenario"),
                _over_admitted(c),
                Cell(_med_range(c.lease_unspent_share, fmt.pct)),
                _status(c),
            ],
        })
    return rows


LEASE_HEAD = [
    ("implementation", ""), ("mode", ""), ("workload", ""), ("conn.", "concurrent connections"),
    ("ok/runs", "ok runs / run files"), ("req/s", "median responses per second over ok runs"),
    ("×\u00a0quotas off", "req/s ÷ quotas-off req/s"),
    ("×\u00a0peer", "req/s ÷ fastify-rate-limit's; above 1, sluice answers more"),
    ("Valkey trips/ resp.", "script calls per response: each lease take is one"),
    ("plain client's trips/ resp.", "the same client without leases, same scenario"),
    ("over-admitted", "writes admitted beyond the points Valkey granted, summed over ok runs: "
     "must be 0"),
    ("unspent share", "points leased but never spent nor handed back (lapsed with their window "
     "or held at the end) ÷ points leased, median (min–max): the bound on under-admission"),
    ("status", ""),
]


def failed_rows(runs: list[Run]) -> list[dict[str, str]]:
    out = []
    for r in sorted((r for r in runs if not r.ok), key=lambda r: r.file):
        responses = r.counts.get("requests") if r.counts else None
        out.append({
            "file": r.file,
            "config": f"{r.implementation} {r.mode} {r.workload} {r.connections}c {r.duration_s:g}s",
            "run": str(r.run),
            "reasons": "; ".join(r.failure_reasons) or "no reason recorded",
            "responses": fmt.count(responses),
            "wall": fmt.seconds(r.wall_s),
        })
    return out


def _ratio_cells(r: Ratio) -> list[Cell]:
    if r.mean is None:
        return [Cell("n/a", cls="muted", title=r.why_na or ""), Cell(r.why_na or "", cls="muted"),
                Cell(fmt.DASH)]
    rng = f"{fmt.ratio(r.min)}–{fmt.ratio(r.max)}" if len(r.values) > 1 else fmt.DASH
    return [Cell(fmt.ratio(r.mean), cls="strong",
                 title="per round: " + ", ".join(fmt.ratio(v) for v in r.values)),
            Cell(rng), Cell(str(len(r.values)), title="rounds " + ", ".join(map(str, r.rounds)))]


def _ms(c: Optional[CpuCost]) -> str:
    if c is None or c.mean is None:
        return fmt.DASH
    spread = f" ({c.min:.3f}–{c.max:.3f})" if len(c.values) > 1 else ""
    return f"{c.mean:.3f}{spread}"


def _runs(c: Optional[CpuCost]) -> str:
    if c is None:
        return ""
    return ", ".join(f"r{n}: {v:.3f}" for v, n in zip(c.values, c.rounds))


def _rate_cell(cfg: Optional[Config]) -> Cell:
    if cfg is None:
        return Cell(fmt.DASH)
    rates = [r.rate("requestsPerSec") for r in cfg.ok]
    rates = [v for v in rates if v is not None]
    if not rates:
        return Cell(fmt.DASH)
    return Cell(fmt.rate(sum(rates) / len(rates)), title=f"mean over {len(rates)} ok runs")


def headline_rows(h: Headline) -> dict[str, Any]:
    nostr = [{"cells": [Cell(r.numerator.relay_impl), Cell(str(r.numerator.connections)),
                        Cell(r.label, cls="name"), _rate_cell(r.numerator),
                        _rate_cell(r.baseline), *_ratio_cells(r)]} for r in h.nostr]
    http = []
    for vp, vq in zip(h.http_vs_peer, h.http_vs_quotas_off):
        http.append({"cells": [Cell(str(vp.numerator.connections)), Cell(vp.label, cls="name"),
                               *_ratio_cells(vp), *_ratio_cells(vq)]})
    cpu = []
    for own, other, why in h.cpu:
        c = own.config
        base_role = "peer" if c.workload == "light" else "relay (alone)"
        cpu.append({"cells": [
            Cell(c.workload_label), Cell(str(c.connections)),
            Cell(f"{c.implementation} {c.mode}", cls="name"),
            Cell(_ms(own), cls="strong", title=_runs(own)), Cell(_runs(own), cls="muted"),
            Cell(base_role), Cell(_ms(other) if other else "n/a", title=why or _runs(other)),
            Cell(_runs(other) if other else why, cls="muted"),
        ]})
    return {"nostr": nostr, "http": http, "cpu": cpu, "notes": h.notes,
            "empty": not (nostr or http or cpu)}


def render(*, header: Header, configs: list[Config], runs: list[Run],
           unreadable: list[Unreadable], findings: list[Finding], charts: ChartSet,
           warnings: list[str], headline: Optional[Headline] = None) -> str:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2"]),
                      trim_blocks=True, lstrip_blocks=True)
    template = env.get_template("report.html.j2")
    modes = sorted({c.mode for c in configs if not c.is_adaptive}, key=mode_rank)
    by_topic = [(t, [f.text for f in findings if f.topic == t]) for t in TOPICS]
    return template.render(
        ratios=headline_rows(headline or Headline()),
        header=header,
        plotlyjs=Markup(plotly.offline.get_plotlyjs()),
        plotly_version=plotly.__version__,
        findings=[(t, texts) for t, texts in by_topic if texts],
        summary_head=SUMMARY_HEAD,
        topologies=[(m, summary_rows([c for c in configs if c.mode == m and not c.is_adaptive]))
                    for m in modes],
        known_modes=MODES,
        adaptive_head=ADAPTIVE_HEAD,
        adaptive=adaptive_rows(configs),
        lease_head=LEASE_HEAD,
        leases=lease_rows(configs),
        charts=[(c, Markup(c.html)) for c in charts.charts],
        omitted=charts.omitted,
        failed=failed_rows(runs),
        unreadable=unreadable,
        warnings=warnings,
        columns=COLUMNS,
        n_runs=len(runs),
        n_ok=sum(1 for r in runs if r.ok),
        n_configs=len(configs),
        high_cv=f"{HIGH_CV:.0%}",
        has_adaptive=any(is_adaptive(c.workload) for c in configs),
    )
