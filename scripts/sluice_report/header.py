"""The report's header: when, on what, with which versions and which command.

README.md and benchmark.log are the harness's own account; the run files are the fallback,
and disagreements between run files (two machines, two versions) are shown, not hidden.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from .load import ResultsDir, Run
from .names import CEILING, NO_INFLIGHT_SETTING, impl_rank, mode_rank, workload_rank

_DIR_STAMP = re.compile(r"^(\d{8})_(\d{6})$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LOG_TROUBLE = re.compile(r"\b(error|fail(ed|ure)?|warn(ing)?|timeout)\b", re.IGNORECASE)


@dataclass
class Header:
    directory: str
    run_date: str
    first_start: Optional[str]
    last_finish: Optional[str]
    machines: list[str]
    versions: list[tuple[str, str]]
    command: Optional[str]
    command_source: str
    settings: list[tuple[str, str]]
    clients: list[tuple[str, str, str]]
    client_comparison: list[SettingComparison]
    client_confounds: list[str]
    readme: Optional[str]
    log_trouble: list[str] = field(default_factory=list)
    log_lines: int = 0
    warnings: list[str] = field(default_factory=list)


def _run_date(path: Path, runs: list[Run]) -> str:
    m = _DIR_STAMP.match(path.name)
    if m:
        try:
            dt = datetime.strptime(m[1] + m[2], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
            return dt.strftime("%Y-%m-%d %H:%M:%S UTC")
        except ValueError:
            pass
    starts = sorted(r.started_at for r in runs if r.started_at)
    return starts[0] if starts else "unknown"


def _machine_text(m: dict[str, Any]) -> str:
    parts = []
    if m.get("cpus") is not None:
        parts.append(f"{m['cpus']} CPUs" + (f" ({m['cpuModel']})" if m.get("cpuModel") else ""))
    elif m.get("cpuModel"):
        parts.append(str(m["cpuModel"]))
    if m.get("memGiB") is not None:
        parts.append(f"{m['memGiB']} GiB")
    if m.get("kernel"):
        parts.append(f"kernel {m['kernel']}")
    if m.get("node"):
        parts.append(f"Node {m['node']}")
    known = {"cpus", "cpuModel", "memGiB", "kernel", "node"}
    parts += [f"{k} {v}" for k, v in sorted(m.items()) if k not in known]
    return ", ".join(parts) or "not recorded"


def _distinct(values: list[Any]) -> str:
    seen: list[str] = []
    for v in values:
        s = str(v)
        if s not in seen:
            seen.append(s)
    return ", ".join(seen)


def _settings(runs: list[Run]) -> list[tuple[str, str]]:
    """What the runs themselves say was run: the fallback for a missing command line."""
    def col(key: str) -> list[Any]:
        return [r.config.get(key) for r in runs if r.config.get(key) is not None]
    return [
        ("implementations", _distinct(sorted({r.implementation for r in runs}, key=impl_rank))),
        ("modes", _distinct(sorted({r.mode for r in runs}, key=mode_rank))),
        ("workloads", _distinct(sorted({r.workload for r in runs}, key=workload_rank))),
        ("connections", _distinct(sorted({r.connections for r in runs}))),
        ("duration s", _distinct(sorted({f"{r.duration_s:g}" for r in runs}))),
        ("warm-up s", _distinct(sorted(set(col("warmupSec"))))),
        ("runs per configuration", _distinct(sorted(set(col("runs"))))),
        ("identities", _distinct(sorted(set(col("keys"))))),
        ("distribution", _distinct(sorted(set(map(str, col("distribution")))))),
        ("quota", _distinct(sorted({f"{q.get('points')} per {q.get('windowSec')} s"
                                    for q in col("quota") if isinstance(q, dict)}))),
        ("gateway workers", _distinct(sorted({_workers_text(r) for r in runs
                                              if r.gateway_workers is not None}))),
        ("CPUs (single box)", _distinct(sorted({_cpus_text(r) for r in runs}))),
    ]


def _workers_text(run: Run) -> str:
    """`workers` as asked for and the processes that served the load: "auto (2 processes)"."""
    asked = run.config.get("workers") or 1
    served = run.gateway_workers
    return f"{asked}" if served in (None, asked) else f"{asked} ({served} processes)"


def _cpus_text(run: Run) -> str:
    """Where relay, gateway and Valkey ran (pinned with taskset, or not), and the load."""
    cpus, load = run.cpus, run.load_cpus
    where = (f"relay, gateway and Valkey pinned to CPUs {','.join(map(str, cpus))}" if cpus
             else "not pinned")
    return where + (f"; load generator on CPUs {','.join(map(str, load))}" if load else "")


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as one level, values as recorded (lists joined)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            # The client's own settings sit one level down: no prefix for them.
            out.update(_flatten(v, "" if k == "settings" else f"{prefix}{k}."))
        elif isinstance(v, list):
            out[prefix + k] = ", ".join(map(str, v))
        else:
            out[prefix + k] = v
    return out


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


# The same setting under each library's own name (the sluice gateway records glide's
# requestTimeoutMs / connectionTimeoutMs, ioredis' and iovalkey's commandTimeoutMs /
# connectTimeoutMs; the peer, ioredis under fastify-rate-limit, commandTimeoutMs and
# connectTimeoutMs, or ioredis' own option names).
_COMPARABLE = {
    "command timeout ms": ("commandTimeoutMs", "requestTimeoutMs", "commandTimeout",
                           "requestTimeout"),
    "connect timeout ms": ("connectTimeoutMs", "connectionTimeoutMs", "connectTimeout",
                           "connectionTimeout"),
    "in-flight limit": ("inflightRequestsLimit", "inflightLimit"),
}
_INFLIGHT = "in-flight limit"
# NO_INFLIGHT_SETTING: libraries that have no in-flight limit, whose null there is not a
# difference from glide's (the clients table says which).
NOT_A_SETTING = "n/a: not a setting of this library"


def _library(flat: dict[str, Any], run: Run) -> Optional[str]:
    lib = flat.get("client")
    return lib if isinstance(lib, str) else run.client


def _comparable(flat: dict[str, Any], library: Optional[str], label: str) -> Optional[tuple[str, bool]]:
    """(shown value, whether it takes part in the comparison), or None when not recorded."""
    key = next((k for k in _COMPARABLE[label] if k in flat), None)
    value = flat[key] if key is not None else None
    if label == _INFLIGHT and value is None and library in NO_INFLIGHT_SETTING:
        return NOT_A_SETTING, False
    if key is None:
        return None
    if value is None:
        return "not set (library default)", True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}", True
    return _text(value), True


@dataclass(frozen=True)
class SettingComparison:
    label: str
    values: list[tuple[str, list[str]]]  # (value, implementations), most implementations first
    unequal: bool

    @property
    def text(self) -> str:
        return "; ".join(f"{v} ({', '.join(impls)})" for v, impls in self.values)


def compare_client_settings(runs: list[Run]) -> list[SettingComparison]:
    """Timeouts and in-flight limits across implementations (quotas-off has no quota client).

    A difference is a confound for every comparison between the implementations concerned;
    "not a setting of this library" is not a difference.
    """
    out = []
    for label in _COMPARABLE:
        seen: dict[tuple[str, bool], set[str]] = {}
        for r in runs:
            if not r.client_settings or r.implementation == CEILING:
                continue
            flat = _flatten(r.client_settings)
            got = _comparable(flat, _library(flat, r), label)
            if got is not None:
                seen.setdefault(got, set()).add(r.implementation)
        if not seen:
            continue
        compared = {value for value, takes_part in seen if takes_part}
        values = sorted(seen.items(), key=lambda kv: (not kv[0][1], -len(kv[1]), kv[0][0]))
        out.append(SettingComparison(
            label, [(v, sorted(impls, key=impl_rank)) for (v, _), impls in values],
            len(compared) > 1))
    return out


def unequal_client_settings(runs: list[Run]) -> list[str]:
    """Timeouts and in-flight limits that differ between implementations (a confound)."""
    out = []
    for cmp in compare_client_settings(runs):
        if cmp.unequal:
            parts = [f"{v} ({', '.join(impls)})" for v, impls in cmp.values
                     if v != NOT_A_SETTING]
            out.append(f"client {cmp.label} differs between implementations: {'; '.join(parts)}"
                       f": comparisons between them mix the client's settings with its speed")
    return out


def client_settings(runs: list[Run]) -> list[tuple[str, str, str]]:
    """(implementation, mode, settings) as the servers recorded them; differing runs are listed."""
    rows: dict[tuple[str, str], list[str]] = {}
    inflight_keys = _COMPARABLE[_INFLIGHT]
    for r in sorted(runs, key=lambda r: (impl_rank(r.implementation), mode_rank(r.mode))):
        if not r.client_settings:
            continue
        flat = _flatten(r.client_settings)
        library = _library(flat, r)
        parts = []
        for k, v in flat.items():
            if k in ("implementation", "client", "mode") and v == getattr(r, k, v):
                continue
            if k in inflight_keys and v is None and library in NO_INFLIGHT_SETTING:
                parts.append(f"{k} {NOT_A_SETTING}")
            else:
                parts.append(f"{k} {_text(v)}")
        text = "; ".join(parts)
        texts = rows.setdefault((r.implementation, r.mode), [])
        if text not in texts:
            texts.append(text)
    return [(impl, mode, " | ".join(texts)) for (impl, mode), texts in rows.items()]


def build_header(rd: ResultsDir) -> Header:
    runs = rd.runs
    warnings: list[str] = []
    machines = sorted({_machine_text(r.machine) for r in runs if r.machine})
    if len(machines) > 1:
        warnings.append(f"run files name {len(machines)} different machines: {' | '.join(machines)}")
    versions: dict[str, list[str]] = {}
    for r in runs:
        for k, v in r.versions.items():
            vals = versions.setdefault(str(k), [])
            if str(v) not in vals:
                vals.append(str(v))
    for k, vals in versions.items():
        if len(vals) > 1:
            warnings.append(f"run files disagree on the {k} version: {', '.join(vals)}")
    confounds = unequal_client_settings(runs)
    warnings += confounds
    command = rd.session.get("command") if rd.session else None
    source = "session.json" if command else "not recorded (no session.json)"
    starts = sorted(r.started_at for r in runs if r.started_at)
    finishes = sorted(r.finished_at for r in runs if r.finished_at)
    log_lines = _ANSI.sub("", rd.log).splitlines() if rd.log else []
    return Header(
        directory=str(rd.path),
        run_date=_run_date(rd.path, runs),
        first_start=starts[0] if starts else None,
        last_finish=finishes[-1] if finishes else None,
        machines=machines or ["not recorded"],
        versions=[(k, " / ".join(v)) for k, v in sorted(versions.items())],
        command=command,
        command_source=source,
        settings=[(k, v) for k, v in _settings(runs) if v]
        + [(str(k), str(v)) for k, v in ((rd.session or {}).get("settings") or {}).items()],
        clients=client_settings(runs),
        client_comparison=compare_client_settings(runs),
        client_confounds=confounds,
        readme=rd.readme,
        log_trouble=[ln for ln in log_lines if _LOG_TROUBLE.search(ln)][:200],
        log_lines=len(log_lines),
        warnings=warnings,
    )
