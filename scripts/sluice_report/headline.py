"""The report's first section: ratios between configurations measured in the same session.

Runs of one session are interleaved: round r runs every configuration once, so run r of a
gateway and run r of its baseline shared the machine's state at about the same time. Each
ratio is therefore taken per round (both runs ok) and summarised as the mean over rounds with
the lowest and highest round. A baseline that is missing, or no round where both are ok,
gives "n/a" with the reason; nothing is guessed.

- Nostr: EVENT/s (OKs per second) through each gateway configuration / the relay alone, same
  relay implementation and connections (the relay alone has no Valkey: any topology's gateway
  compares with it). The long tail (every event from a new author) divides by the relay alone
  on the long tail's events, and reads (REQs answered per second, 50 stored notes each) by the
  relay alone on the same pages; every other Nostr workload by the relay alone on `nostr`'s.
- HTTP light: each sluice client / the fastify-rate-limit peer and / quotas-off, same
  topology and connections.
- CPU: the front end's CPU milliseconds per request, per run, next to the peer's (HTTP) or the
  relay's (Nostr).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .aggregate import Config
from .load import REFERENCE_RELAY, Run
from .names import (CEILING, CLIENTS, GATEWAY_VERIFIED, LONG_TAIL, PEER, READS, RELAY_ALONE,
                    RELAY_VERIFIED, SENDER_ONLY, impl_rank, mode_rank)
from .stats import mean

# Nostr through the gateway: the default (authors charged on the hash far from their limit),
# the default on a long tail of authors (every event from a new one), every signature verified
# by the gateway, by the relay (authors charged on its OK), and sender-only; and reads.
NOSTR_WORKLOADS = ("nostr", LONG_TAIL, GATEWAY_VERIFIED, RELAY_VERIFIED, SENDER_ONLY, READS)
NOSTR_LABELS = {"nostr": "", LONG_TAIL: " (long tail: every event from a new author)",
                GATEWAY_VERIFIED: " (verified by the gateway)",
                RELAY_VERIFIED: " (verified by the relay)", SENDER_ONLY: " (sender only)",
                READS: " (reads: REQs per second, 50 stored notes each)"}
# Each Nostr workload's relay-alone baseline: the relay on the same events (the long tail's
# are signed by a key each; reads ask for the same pages); the verification variants send
# `nostr`'s.
RELAY_ALONE_WORKLOAD = {LONG_TAIL: LONG_TAIL, READS: READS}


class _PerRound:
    """Mean, lowest and highest of the per-round `values`; None when there are none."""

    values: tuple[float, ...]

    @property
    def mean(self) -> Optional[float]:
        return mean(self.values) if self.values else None

    @property
    def min(self) -> Optional[float]:
        return min(self.values) if self.values else None

    @property
    def max(self) -> Optional[float]:
        return max(self.values) if self.values else None


@dataclass(frozen=True)
class Ratio(_PerRound):
    """numerator / baseline over the rounds where both ran ok."""

    label: str
    numerator: Config
    baseline: Optional[Config]
    values: tuple[float, ...] = ()
    rounds: tuple[int, ...] = ()
    why_na: Optional[str] = None


@dataclass(frozen=True)
class CpuCost(_PerRound):
    """CPU ms per request of one role, per ok run."""

    config: Config
    role: str
    values: tuple[float, ...]
    rounds: tuple[int, ...]


@dataclass
class Headline:
    nostr: list[Ratio] = field(default_factory=list)
    http_vs_peer: list[Ratio] = field(default_factory=list)
    http_vs_quotas_off: list[Ratio] = field(default_factory=list)
    cpu: list[tuple[CpuCost, Optional[CpuCost], str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def rate(run: Run) -> Optional[float]:
    """Answers per second of the measured window (for Nostr: OKs, i.e. EVENT/s)."""
    return run.rate("requestsPerSec")


def cpu_ms_per_request(run: Run, role: str) -> Optional[float]:
    """CPU ms per response of a role's processes (summed), as the run file states them."""
    return run.role_sum(role, "cpu_ms_per_request")


def paired(numerator: Config, baseline: Config) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Per-round ratios: run r of each, where both are ok and the baseline is above zero."""
    base = {r.run: rate(r) for r in baseline.ok}
    values, rounds = [], []
    for r in sorted(numerator.ok, key=lambda r: r.run):
        num, den = rate(r), base.get(r.run)
        if num is not None and den:
            values.append(num / den)
            rounds.append(r.run)
    return tuple(values), tuple(rounds)


def _ratio(label: str, numerator: Config, baseline: Optional[Config], missing: str) -> Ratio:
    if baseline is None:
        return Ratio(label, numerator, None, why_na=missing)
    values, rounds = paired(numerator, baseline)
    if not values:
        why = ("no round in which both ran ok" if numerator.ok and baseline.ok
               else f"{'the baseline' if numerator.ok else numerator.implementation} has no ok run")
        return Ratio(label, numerator, baseline, why_na=why)
    return Ratio(label, numerator, baseline, values, rounds)


def _pick(candidates: list[Config], duration_s: float) -> Optional[Config]:
    """The same duration first, then the one with most ok runs."""
    if not candidates:
        return None
    return sorted(candidates, key=lambda c: (c.duration_s != duration_s, -len(c.ok),
                                             c.duration_s))[0]


def relay_alone_for(cfg: Config, configs: list[Config]) -> Optional[Config]:
    # The relay alone does not verify at the gateway: one baseline for every variant that
    # sends `nostr`'s events; the long tail and reads have their own.
    workload = RELAY_ALONE_WORKLOAD.get(cfg.workload, "nostr")
    return _pick([c for c in configs if c.implementation == RELAY_ALONE
                  and c.workload == workload and c.relay_impl == cfg.relay_impl
                  and c.connections == cfg.connections], cfg.duration_s)


def same_scenario(cfg: Config, configs: list[Config], implementation: str) -> Optional[Config]:
    return _pick([c for c in configs if c.implementation == implementation
                  and c.mode == cfg.mode and c.workload == cfg.workload
                  and c.relay_impl == cfg.relay_impl and c.connections == cfg.connections],
                 cfg.duration_s)


def _cost(cfg: Config, role: str) -> Optional[CpuCost]:
    pairs = [(v, r.run) for r in sorted(cfg.ok, key=lambda r: r.run)
             if (v := cpu_ms_per_request(r, role)) is not None]
    if not pairs:
        return None
    return CpuCost(cfg, role, tuple(v for v, _ in pairs), tuple(n for _, n in pairs))


def _order(c: Config) -> tuple:
    return (c.relay_impl != REFERENCE_RELAY, c.relay_impl, c.connections, mode_rank(c.mode),
            impl_rank(c.implementation), c.duration_s)


def build(configs: list[Config]) -> Headline:
    h = Headline()
    steady = sorted((c for c in configs if not c.is_adaptive), key=_order)

    nostr = [c for c in steady if c.workload in NOSTR_WORKLOADS]
    for c in nostr:
        if c.implementation == RELAY_ALONE:
            continue
        base = relay_alone_for(c, configs)
        label = f"{c.implementation} {c.mode}" + NOSTR_LABELS[c.workload]
        r = _ratio(label, c, base,
                   f"no relay-alone {RELAY_ALONE_WORKLOAD.get(c.workload, 'nostr')} runs with the "
                   f"{c.relay_impl} relay at {c.connections} connections in this session")
        h.nostr.append(r)
        c.paired["relay_alone"] = r
    if nostr and not h.nostr:
        h.notes.append("Nostr: only relay-alone runs, no gateway to compare with.")

    for c in steady:
        if c.workload != "light" or c.implementation not in CLIENTS:
            continue
        peer = same_scenario(c, configs, PEER)
        r = _ratio(f"{c.implementation} {c.mode}", c, peer,
                   f"no {PEER} runs in {c.mode} light at {c.connections} connections")
        h.http_vs_peer.append(r)
        c.paired["peer"] = r
        ceiling = same_scenario(c, configs, CEILING)
        r = _ratio(f"{c.implementation} {c.mode}", c, ceiling,
                   f"no {CEILING} runs in {c.mode} light at {c.connections} connections")
        h.http_vs_quotas_off.append(r)
        c.paired["quotas_off"] = r

    for c in steady:
        if c.workload == "light" and c.implementation in CLIENTS:
            own = _cost(c, "gateway")
            peer = same_scenario(c, configs, PEER)
            other = _cost(peer, "peer") if peer else None
            if own:
                h.cpu.append((own, other, "" if other else
                              f"no {PEER} CPU figures in {c.mode} light at {c.connections} "
                              f"connections"))
        elif c.workload in NOSTR_WORKLOADS and c.implementation != RELAY_ALONE:
            own = _cost(c, "gateway")
            alone = relay_alone_for(c, configs)
            other = _cost(alone, "relay") if alone else None
            if own:
                h.cpu.append((own, other, "" if other else
                              f"no relay-alone CPU figures with the {c.relay_impl} relay at "
                              f"{c.connections} connections"))
    return h
