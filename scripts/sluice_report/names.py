"""The vocabulary of a results directory: implementations, orders, labels, colours."""

from __future__ import annotations

CEILING = "quotas-off"
PEER = "fastify-rate-limit"
CLIENTS = ("valkey-glide", "iovalkey", "ioredis")
# The load straight to the relay (Nostr): the baseline of "through the gateway / relay alone".
RELAY_ALONE = "relay-alone"
IMPLEMENTATIONS = (RELAY_ALONE, CEILING, *CLIENTS, PEER)

MODES = ("standalone", "cluster")
WORKLOADS = ("light", "heavy", "flood", "nostr", "nostr-relay-verified", "nostr-sender-only", "adaptive-none", "adaptive-pid", "adaptive-lead")
# feed: the pressure feed that adaptive runs sample beside relay, gateways and Valkey.
ROLES = ("gateway", "peer", "relay", "feed", "valkey")
LAWS = ("none", "pid", "lead")

IMPL_COLORS = {
    RELAY_ALONE: "#ff7f0e",
    CEILING: "#7f7f7f",
    "valkey-glide": "#1f77b4",
    "iovalkey": "#2ca02c",
    "ioredis": "#d62728",
    PEER: "#9467bd",
}
ROLE_COLORS = {"gateway": "#1f77b4", "peer": "#9467bd", "relay": "#ff7f0e", "feed": "#17becf",
               "valkey": "#d62728"}
LAW_COLORS = {"none": "#7f7f7f", "pid": "#ff7f0e", "lead": "#1f77b4"}
LAW_LABELS = {"none": "no adaptation", "pid": "reference PID", "lead": "sluice lead law"}
OTHER_COLORS = ("#8c564b", "#e377c2", "#bcbd22", "#17becf")


def _rank(value: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(value), "") if value in order else (len(order), value)


def impl_rank(impl: str) -> tuple[int, str]:
    return _rank(impl, IMPLEMENTATIONS)


def mode_rank(mode: str) -> tuple[int, str]:
    return _rank(mode, MODES)


def workload_rank(workload: str) -> tuple[int, str]:
    return _rank(workload, WORKLOADS)


def role_rank(role: str) -> tuple[int, str]:
    return _rank(role, ROLES)


def is_adaptive(workload: str) -> bool:
    return workload.startswith("adaptive")


def law_of(workload: str) -> str:
    return workload.split("-", 1)[1] if workload.startswith("adaptive-") else workload


def impl_color(impl: str) -> str:
    if impl in IMPL_COLORS:
        return IMPL_COLORS[impl]
    return OTHER_COLORS[sum(map(ord, impl)) % len(OTHER_COLORS)]
