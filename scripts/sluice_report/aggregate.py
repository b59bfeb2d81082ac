"""Runs grouped into configurations; every figure is a Spread over the ok runs only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import names
from .load import LATENCY_FIELDS, REFERENCE_RELAY, Run
from .stats import EMPTY, Spread, median, spread

Key = tuple[str, str, str, int, float, str]
ADAPTIVE_FIELDS = (
    "peakUOverTarget", "secondsAboveTarget", "emergencyEntries", "acceptedShareOfSustainable",
    "mPeakToPeak", "uPeakToPeak", "propagationP50Ms", "propagationP99Ms",
)
# Settings that should not differ between runs of one configuration.
_SETTING_KEYS = ("client", "transport", "keys", "distribution", "zipfExponent", "floodShare",
                 "quota", "inMemoryBlock", "ranges", "relayWorkIterations", "law", "warmupSec")


@dataclass
class Config:
    key: Key
    runs: list[Run]
    ok: list[Run] = field(default_factory=list)
    failed: list[Run] = field(default_factory=list)
    req: Spread = EMPTY
    ok_per_s: Spread = EMPTY
    limited_per_s: Spread = EMPTY
    other_per_s: Spread = EMPTY
    errors_per_s: Spread = EMPTY
    rejected_share: Spread = EMPTY
    latency: dict[str, Spread] = field(default_factory=dict)
    cpu: dict[str, Spread] = field(default_factory=dict)
    rss: dict[str, Spread] = field(default_factory=dict)
    cmds_per_request: Spread = EMPTY  # every command Valkey executed, inside scripts included
    round_trips_per_request: Spread = EMPTY  # script calls: the round trips carrying the quota
    commands_per_request: dict[str, float] = field(default_factory=dict)
    adaptive: dict[str, Spread] = field(default_factory=dict)
    # +lease runs (None / EMPTY otherwise): writes admitted beyond the points Valkey granted,
    # summed over ok runs (must be 0), and unspent / leased points per run.
    lease_over_admitted: Optional[int] = None
    lease_unspent_share: Spread = EMPTY
    warnings: list[str] = field(default_factory=list)
    # Filled by ratios.apply_ratios.
    ratio_vs_quotas_off: Optional[float] = None
    ratio_vs_best_client: Optional[float] = None
    ratio_vs_peer: Optional[float] = None
    # Filled by headline.build: per-round ratios ("relay_alone", "peer", "quotas_off").
    paired: dict[str, Any] = field(default_factory=dict)

    implementation = property(lambda self: self.key[0])
    mode = property(lambda self: self.key[1])
    workload = property(lambda self: self.key[2])
    connections = property(lambda self: self.key[3])
    duration_s = property(lambda self: self.key[4])
    relay_impl = property(lambda self: self.key[5])

    @property
    def workload_label(self) -> str:
        """The workload, with the relay when it is not the reference one."""
        if self.relay_impl == REFERENCE_RELAY:
            return self.workload
        return f"{self.workload} ({self.relay_impl})"

    @property
    def status(self) -> str:
        if not self.ok:
            return "failed"
        return "partial" if self.failed else "ok"

    @property
    def expected_runs(self) -> Optional[int]:
        counts = [r.runs_expected for r in self.runs if r.runs_expected is not None]
        return max(counts) if counts else None

    @property
    def high_variance(self) -> Optional[bool]:
        return self.req.high_variance

    @property
    def is_adaptive(self) -> bool:
        return names.is_adaptive(self.workload)

    @property
    def law(self) -> Optional[str]:
        law = self._setting("law")
        if law is None and self.is_adaptive:
            law = names.law_of(self.workload)
        return law

    # Settings the runs share, from the first run that states each.
    client = property(lambda self: self._setting("client"))
    transport = property(lambda self: self._setting("transport"))
    keys = property(lambda self: self._setting("keys"))

    def _setting(self, key: str) -> Any:
        for r in self.runs:
            if r.config.get(key) is not None:
                return r.config[key]
        return None

    @property
    def distribution(self) -> Optional[str]:
        d = self._setting("distribution")
        s = self._setting("zipfExponent")
        return f"zipf({s:g})" if d == "zipf" and isinstance(s, (int, float)) else d

    @property
    def in_memory_block(self) -> Optional[bool]:
        v = self._setting("inMemoryBlock")
        return v if isinstance(v, bool) else None

    @property
    def label(self) -> str:
        return (f"{self.implementation} {self.mode} {self.workload_label} {self.connections}c "
                f"{self.duration_s:g}s")

    def representative_run(self) -> Optional[Run]:
        """The ok run with the median peak u (lower middle): what the time-series chart shows."""
        runs = [r for r in self.ok if r.timeseries and "u" in r.timeseries]
        if not runs:
            return None
        runs.sort(key=lambda r: (_adaptive(r, "peakUOverTarget") or 0.0, r.run))
        return runs[(len(runs) - 1) // 2]


def _adaptive(r: Run, key: str) -> Optional[float]:
    v = (r.adaptive or {}).get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _unspent_share(r: Run) -> Optional[float]:
    """Points leased but never spent nor handed back / points leased: under-admission's bound."""
    leased = (r.leases or {}).get("leased")
    return r.leases["unspent"] / leased if leased else None


def _over(runs: list[Run], metric: Callable[[Run], Optional[float]]) -> Spread:
    return spread(metric(r) for r in runs)


def build_config(key: Key, runs: list[Run]) -> Config:
    runs = sorted(runs, key=lambda r: (r.run, r.file))
    cfg = Config(key=key, runs=runs)
    cfg.ok = [r for r in runs if r.ok]
    cfg.failed = [r for r in runs if not r.ok]
    ok = cfg.ok
    stated = {"req": "requestsPerSec", "ok_per_s": "okPerSec", "limited_per_s": "limitedPerSec",
              "other_per_s": "otherNon2xxPerSec", "errors_per_s": "errorsPerSec",
              "rejected_share": "limitedShare"}
    for attr, name in stated.items():
        setattr(cfg, attr, _over(ok, lambda r, n=name: r.rate(n)))
    cfg.latency = {f: _over(ok, lambda r, f=f: r.latency.get(f)) for f in LATENCY_FIELDS}
    roles = sorted({p.role for r in ok for p in r.processes}, key=names.role_rank)
    cfg.cpu = {role: _over(ok, lambda r, ro=role: r.role_sum(ro, "cpu_mean")) for role in roles}
    cfg.rss = {role: _over(ok, lambda r, ro=role: r.role_sum(ro, "rss_mean")) for role in roles}
    cfg.cmds_per_request = _over(ok, lambda r: r.valkey_per_request("perRequest"))
    cfg.round_trips_per_request = _over(ok, lambda r: r.valkey_per_request("scriptCallsPerRequest"))
    commands = sorted({c for r in ok for c in r.valkey_commands})
    for c in commands:
        per = [r.valkey_commands.get(c, 0.0) / r.counts["requests"]
               for r in ok if r.counts and r.counts.get("requests")]
        m = median(per)
        if m is not None:
            cfg.commands_per_request[c] = m
    cfg.adaptive = {f: _over(ok, lambda r, f=f: _adaptive(r, f)) for f in ADAPTIVE_FIELDS}
    accounted = [r.leases for r in ok if r.leases is not None]
    if accounted:
        cfg.lease_over_admitted = sum(book["overAdmitted"] for book in accounted)
    cfg.lease_unspent_share = _over(ok, _unspent_share)
    _check_settings(cfg)
    return cfg


def _check_settings(cfg: Config) -> None:
    for k in _SETTING_KEYS:
        values = {repr(r.config.get(k)) for r in cfg.runs}
        if len(values) > 1:
            cfg.warnings.append(f"{cfg.label}: runs differ in {k}: {', '.join(sorted(values))}")
    expected = cfg.expected_runs
    if expected is not None and expected != len(cfg.runs):
        have = sorted(r.run for r in cfg.runs)
        cfg.warnings.append(f"{cfg.label}: {len(cfg.runs)} run file(s) (runs {have}) but the "
                            f"session planned {expected}")


def sort_key(cfg: Config) -> tuple[Any, ...]:
    return (names.mode_rank(cfg.mode), names.workload_rank(cfg.workload),
            cfg.relay_impl != REFERENCE_RELAY, cfg.relay_impl, cfg.connections, cfg.duration_s, names.impl_rank(cfg.implementation))


def group(runs: list[Run]) -> list[Config]:
    by_key: dict[Key, list[Run]] = {}
    for r in runs:
        by_key.setdefault(r.key, []).append(r)
    return sorted((build_config(k, rs) for k, rs in by_key.items()), key=sort_key)
