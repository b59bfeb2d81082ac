"""summary.csv: one row per configuration, columns exactly as docs/REPORT-COLUMNS.md defines them."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional

from .aggregate import Config
from .columns import COLUMN_NAMES
from .headline import cpu_ms_per_request
from .names import PEER
from .stats import Spread, mean

MIB = 2**20


def _n(v: Optional[float], digits: int) -> str:
    # Empty, never 0, for a figure that does not exist.
    return "" if v is None else f"{v:.{digits}f}"


def _b(v: Optional[bool]) -> str:
    return "" if v is None else ("true" if v else "false")


def _med(s: Optional[Spread], digits: int, scale: float = 1.0) -> str:
    return "" if s is None or s.median is None else _n(s.median * scale, digits)


def _paired(c: Config, key: str, prefix: str) -> dict[str, str]:
    r = c.paired.get(key)
    return {f"{prefix}_mean": _n(r.mean if r else None, 4),
            f"{prefix}_min": _n(r.min if r else None, 4),
            f"{prefix}_max": _n(r.max if r else None, 4)}


def _cpu_ms(c: Config, role: str) -> Optional[float]:
    if c.is_adaptive:
        return None
    return mean([v for r in c.ok if (v := cpu_ms_per_request(r, role)) is not None])


def row(c: Config) -> dict[str, str]:
    a = c.adaptive
    r: dict[str, Any] = {
        "implementation": c.implementation,
        "client": c.client or "",
        "mode": c.mode,
        "workload": c.workload,
        "law": c.law or "",
        "relay_impl": c.relay_impl,
        "transport": c.transport or "",
        "connections": str(c.connections),
        "duration_s": f"{c.duration_s:g}",
        "keys": "" if c.keys is None else str(c.keys),
        "distribution": c.distribution or "",
        "in_memory_block": _b(c.in_memory_block),
        "runs": str(len(c.runs)),
        "ok_runs": str(len(c.ok)),
        "failed_runs": str(len(c.failed)),
        "status": c.status,
        "req_per_s_median": _n(c.req.median, 1),
        "req_per_s_min": _n(c.req.min, 1),
        "req_per_s_max": _n(c.req.max, 1),
        "req_per_s_stddev": _n(c.req.stddev, 1),
        "req_per_s_cv_pct": _n(None if c.req.cv is None else c.req.cv * 100, 2),
        "high_variance": _b(c.high_variance),
        "ok_per_s_median": _n(c.ok_per_s.median, 1),
        "limited_per_s_median": _n(c.limited_per_s.median, 1),
        "other_non2xx_per_s_median": _n(c.other_per_s.median, 1),
        "errors_per_s_median": _n(c.errors_per_s.median, 2),
        "rejected_share_pct": _med(c.rejected_share, 2, 100),
        "latency_p50_ms": _med(c.latency.get("p50"), 3),
        "latency_p90_ms": _med(c.latency.get("p90"), 3),
        "latency_p99_ms": _med(c.latency.get("p99"), 3),
        "latency_max_ms": _med(c.latency.get("max"), 3),
        "latency_mean_ms": _med(c.latency.get("mean"), 3),
        "gateway_cpu_pct": _med(c.cpu.get("gateway"), 1),
        "gateway_rss_mib": _med(c.rss.get("gateway"), 1, 1 / MIB),
        "peer_cpu_pct": _med(c.cpu.get("peer"), 1),
        "peer_rss_mib": _med(c.rss.get("peer"), 1, 1 / MIB),
        "relay_cpu_pct": _med(c.cpu.get("relay"), 1),
        "relay_rss_mib": _med(c.rss.get("relay"), 1, 1 / MIB),
        "feed_cpu_pct": _med(c.cpu.get("feed"), 1),
        "feed_rss_mib": _med(c.rss.get("feed"), 1, 1 / MIB),
        "valkey_cpu_pct": _med(c.cpu.get("valkey"), 1),
        "valkey_rss_mib": _med(c.rss.get("valkey"), 1, 1 / MIB),
        "valkey_cmds_per_request": _med(c.cmds_per_request, 4),
        "valkey_round_trips_per_request": _med(c.round_trips_per_request, 4),
        "ratio_vs_quotas_off": _n(c.ratio_vs_quotas_off, 4),
        "ratio_vs_best_client": _n(c.ratio_vs_best_client, 4),
        "ratio_vs_peer": _n(c.ratio_vs_peer, 4),
        **_paired(c, "relay_alone", "ratio_vs_relay_alone"),
        **_paired(c, "peer", "ratio_vs_peer_paired"),
        **_paired(c, "quotas_off", "ratio_vs_quotas_off_paired"),
        "front_cpu_ms_per_request": _n(_cpu_ms(c, "peer" if c.implementation == PEER
                                                else "gateway"), 4),
        "relay_cpu_ms_per_request": _n(_cpu_ms(c, "relay"), 4),
        "lease_over_admitted": "" if c.lease_over_admitted is None else str(c.lease_over_admitted),
        "lease_unspent_share_pct": _med(c.lease_unspent_share, 2, 100),
        "adaptive_peak_u_over_target": _med(a.get("peakUOverTarget"), 4),
        "adaptive_seconds_above_target_s": _med(a.get("secondsAboveTarget"), 2),
        "adaptive_emergency_entries": _med(a.get("emergencyEntries"), 1),
        "adaptive_accepted_over_sustainable": _med(a.get("acceptedShareOfSustainable"), 4),
        "adaptive_m_peak_to_peak": _med(a.get("mPeakToPeak"), 4),
        "adaptive_propagation_p99_ms": _med(a.get("propagationP99Ms"), 3),
    }
    if tuple(r) != COLUMN_NAMES:
        # The documentation and the file must not drift apart.
        missing = set(COLUMN_NAMES) - set(r)
        extra = set(r) - set(COLUMN_NAMES)
        raise AssertionError(f"summary.csv row != documented columns (missing {missing}, "
                             f"undocumented {extra}, or order differs)")
    return r


def write_summary(configs: list[Config], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMN_NAMES), lineterminator="\n")
        w.writeheader()
        for c in configs:
            w.writerow(row(c))
