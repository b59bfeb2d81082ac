"""Ratios between configurations measured side by side in the same session.

Absolute req/s on a shared machine only holds for that session; ratios of medians taken in
the same session are what carries over. A scenario is (mode, workload, connections).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .aggregate import Config
from .names import CEILING, CLIENTS, PEER, impl_rank
from .stats import ratio

Scenario = tuple[str, str, int]


def scenario(cfg: Config) -> Scenario:
    # The workload label names a third-party relay: its runs are a scenario of their own.
    return (cfg.mode, cfg.workload_label, cfg.connections)


def find(configs: list[Config], implementation: str, scen: Scenario,
         duration_s: Optional[float] = None) -> Optional[Config]:
    """The configuration of one implementation in a scenario that has figures.

    With several durations, the same duration as the caller's wins, then the one with most
    ok runs.
    """
    found = [c for c in configs
             if c.implementation == implementation and scenario(c) == scen and c.req.median is not None]
    if not found:
        return None
    found.sort(key=lambda c: (c.duration_s != duration_s, -len(c.ok), c.duration_s))
    return found[0]


def vs_quotas_off(cfg: Config, configs: list[Config]) -> Optional[float]:
    """quotas-on / quotas-off for the same scenario: the cost of the quota check."""
    if cfg.implementation == CEILING:
        return None
    ceiling = find(configs, CEILING, scenario(cfg), cfg.duration_s)
    return ratio(cfg.req.median, ceiling.req.median if ceiling else None)


def best_client(configs: list[Config], scen: Scenario) -> Optional[Config]:
    present = [c for c in (find(configs, impl, scen) for impl in CLIENTS) if c is not None]
    return max(present, key=lambda c: c.req.median, default=None)


def vs_best_client(cfg: Config, configs: list[Config]) -> Optional[float]:
    if cfg.implementation not in CLIENTS:
        return None
    best = best_client(configs, scenario(cfg))
    return ratio(cfg.req.median, best.req.median if best else None)


def vs_peer(cfg: Config, configs: list[Config]) -> Optional[float]:
    """sluice client / fastify-rate-limit: above 1, sluice answers more."""
    if cfg.implementation not in CLIENTS:
        return None
    peer = find(configs, PEER, scenario(cfg), cfg.duration_s)
    return ratio(cfg.req.median, peer.req.median if peer else None)


@dataclass(frozen=True)
class PeerComparison:
    scenario: Scenario
    client: str
    peer_req: float
    client_req: float

    @property
    def peer_over_client(self) -> float:
        return self.peer_req / self.client_req


def peer_vs_sluice(configs: list[Config]) -> list[PeerComparison]:
    """The peer baseline against each sluice client, per scenario where both have figures."""
    out: list[PeerComparison] = []
    for scen in scenarios_in_order(configs):
        peer = find(configs, PEER, scen)
        if peer is None:
            continue
        for client in CLIENTS:
            c = find(configs, client, scen, peer.duration_s)
            if c is not None and c.req.median:
                out.append(PeerComparison(scen, client, peer.req.median, c.req.median))
    return out


def apply_ratios(configs: list[Config]) -> None:
    for c in configs:
        if c.is_adaptive:
            continue  # paced load: its rate is set by the scenario, not a capacity
        c.ratio_vs_quotas_off = vs_quotas_off(c, configs)
        c.ratio_vs_best_client = vs_best_client(c, configs)
        c.ratio_vs_peer = vs_peer(c, configs)


def scenarios_in_order(configs: list[Config]) -> list[Scenario]:
    seen: list[Scenario] = []
    for c in configs:
        if scenario(c) not in seen:
            seen.append(scenario(c))
    return seen


def ranked_clients(configs: list[Config], scen: Scenario) -> list[Config]:
    """Sluice clients with figures in a scenario, fastest first (ties by the usual order)."""
    present = [c for c in (find(configs, impl, scen) for impl in CLIENTS) if c is not None]
    return sorted(present, key=lambda c: (-c.req.median, impl_rank(c.implementation)))
