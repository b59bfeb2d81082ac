"""The vocabulary of a results directory: implementations, orders, labels, colours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# One list of every name: the run file's schema, which the harness generates from its own.
_SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "run-file.schema.json")
                     .read_text(encoding="utf-8"))


def _enum(prop: dict[str, Any]) -> tuple[str, ...]:
    """The string values a schema property allows (a nullable one: its non-null branch)."""
    for branch in prop.get("anyOf", [prop]):
        if "enum" in branch:
            return tuple(branch["enum"])
    raise ValueError(f"no enum in {prop}")


_CONFIG = _SCHEMA["properties"]["config"]["properties"]
CEILING = "quotas-off"
PEER = "fastify-rate-limit"
# The Valkey clients in the report's order, as the harness's clients table (CLIENTS) names
# them, with their names on chart axes and the libraries that have no in-flight limit.
_CLIENT = _SCHEMA["$defs"]["clientName"]
VALKEY_CLIENTS = tuple(_CLIENT["enum"])
if VALKEY_CLIENTS != _enum(_CONFIG["client"]):
    raise ImportError("the schema's client names disagree with config.client: regenerate it")
CLIENT_LABELS: dict[str, str] = dict(_CLIENT["x-labels"])
NO_INFLIGHT_SETTING = frozenset(_CLIENT["x-no-inflight-limit"])
# The same clients with quota leases on (quotas.lease): sluice implementations too.
LEASE_SUFFIX = "+lease"
LEASED = tuple(f"{c}{LEASE_SUFFIX}" for c in VALKEY_CLIENTS)
# sluice's own implementations: each Valkey client, without and with leases.
CLIENTS = (*VALKEY_CLIENTS, *LEASED)
# The load straight to the relay (Nostr): the baseline of "through the gateway / relay alone".
RELAY_ALONE = "relay-alone"
# A bare Node ws proxy before the relay (Nostr): the floor under the gateway with quotas off.
WS_FLOOR = "ws-floor"
# The same with every client's EVENT over one shared relay connection.
WS_FLOOR_POOLED = "ws-floor-pooled"
# No WebSocket library: each client frame found and unmasked, bytes passed on; a TCP pipe.
WS_FLOOR_FRAMES = "ws-floor-frames"
WS_FLOOR_TCP = "ws-floor-tcp"
WS_FLOORS = (WS_FLOOR, WS_FLOOR_POOLED, WS_FLOOR_FRAMES, WS_FLOOR_TCP)
# The report's order (baselines around the clients); every name is the schema's.
IMPLEMENTATIONS = (RELAY_ALONE, *WS_FLOORS, CEILING, *CLIENTS, PEER)
if set(IMPLEMENTATIONS) != set(_enum(_CONFIG["implementation"])):
    raise ImportError("names.py does not cover the schema's implementations: update it")

MODES = _enum(_CONFIG["mode"])
# Every workload by name, in the report's order, as the harness names them (WORKLOAD_SPECS):
# config.workload, or the variant that config.nostrIdentity picks.
_NAMED = _SCHEMA["$defs"]["workloadName"]
WORKLOADS = tuple(_NAMED["enum"])
VARIANTS = {(v["workload"], v["nostrIdentity"]): name for name, v in _NAMED["x-variants"].items()}
SENDER_ONLY = "nostr-sender-only"
RELAY_VERIFIED = "nostr-relay-verified"
GATEWAY_VERIFIED = "nostr-gateway-verified"
# Every event from a new author (a public relay's long tail): its own relay-alone baseline.
LONG_TAIL = "nostr-long-tail"
if not {SENDER_ONLY, RELAY_VERIFIED, GATEWAY_VERIFIED, LONG_TAIL} <= set(VARIANTS.values()):
    raise ImportError("names.py names Nostr variants the schema does not: update it")
# Pages of stored notes asked over and over (a REQ, its events, EOSE): a request is a REQ.
READS = "nostr-reads"
if READS not in WORKLOADS:
    raise ImportError("names.py names a workload the schema does not: update it")
# feed: the pressure feed that adaptive runs sample beside relay, gateways and Valkey.
ROLES = _enum(_SCHEMA["properties"]["processes"]["items"]["properties"]["role"])
# The adaptive arms in the report's order (no adaptation, then the laws' registry, LAWS) and
# their names in the report.
_LAW = _SCHEMA["$defs"]["lawName"]
LAWS = tuple(_LAW["enum"])
if LAWS != _enum(_CONFIG["law"]):
    raise ImportError("the schema's law names disagree with config.law: regenerate it")
LAW_LABELS: dict[str, str] = dict(_LAW["x-labels"])
NO_ADAPTATION = "none"

# Each client a pair of tab20's colours in the schema's order, plain then +lease; the
# baselines keep orange, grey and purple, which no client gets.
_CLIENT_PAIRS = (("#1f77b4", "#aec7e8"), ("#2ca02c", "#98df8a"), ("#d62728", "#ff9896"),
                 ("#8c564b", "#c49c94"), ("#e377c2", "#f7b6d2"), ("#bcbd22", "#dbdb8d"),
                 ("#17becf", "#9edae5"))
IMPL_COLORS = {
    RELAY_ALONE: "#ff7f0e",
    WS_FLOOR: "#c7c7c7",
    WS_FLOOR_POOLED: "#dddddd",
    WS_FLOOR_FRAMES: "#b0b0b0",
    WS_FLOOR_TCP: "#999999",
    CEILING: "#7f7f7f",
    **{c: plain for c, (plain, _) in zip(VALKEY_CLIENTS, _CLIENT_PAIRS)},
    **{f"{c}{LEASE_SUFFIX}": leased for c, (_, leased) in zip(VALKEY_CLIENTS, _CLIENT_PAIRS)},
    PEER: "#9467bd",
}
ROLE_COLORS = {"gateway": "#1f77b4", "peer": "#9467bd", "relay": "#ff7f0e", "feed": "#17becf",
               "valkey": "#d62728"}
# No adaptation grey, then each law a colour in the schema's order.
_LAW_PALETTE = ("#ff7f0e", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
LAW_COLORS = {NO_ADAPTATION: "#7f7f7f",
              **dict(zip((law for law in LAWS if law != NO_ADAPTATION), _LAW_PALETTE))}
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


def is_leased(impl: str) -> bool:
    """A sluice client with quota leases on (also its several-worker variant, "...+lease-2w")."""
    return LEASE_SUFFIX in impl


def plain_of(impl: str) -> str:
    """The same implementation without leases: what a +lease configuration is compared with."""
    return impl.replace(LEASE_SUFFIX, "", 1)


def law_of(workload: str) -> str:
    return workload.split("-", 1)[1] if workload.startswith("adaptive-") else workload


def impl_color(impl: str) -> str:
    if impl in IMPL_COLORS:
        return IMPL_COLORS[impl]
    return OTHER_COLORS[sum(map(ord, impl)) % len(OTHER_COLORS)]
