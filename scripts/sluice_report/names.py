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
VALKEY_CLIENTS = _enum(_CONFIG["client"])
# The same clients with quota leases on (quotas.lease): sluice implementations too.
LEASE_SUFFIX = "+lease"
LEASED = tuple(f"{c}{LEASE_SUFFIX}" for c in VALKEY_CLIENTS)
# sluice's own implementations: each Valkey client, without and with leases.
CLIENTS = (*VALKEY_CLIENTS, *LEASED)
# The load straight to the relay (Nostr): the baseline of "through the gateway / relay alone".
RELAY_ALONE = "relay-alone"
# The report's order (baselines around the clients); every name is the schema's.
IMPLEMENTATIONS = (RELAY_ALONE, CEILING, *CLIENTS, PEER)
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
if not {SENDER_ONLY, RELAY_VERIFIED} <= set(VARIANTS.values()):
    raise ImportError("names.py names Nostr variants the schema does not: update it")
# feed: the pressure feed that adaptive runs sample beside relay, gateways and Valkey.
ROLES = _enum(_SCHEMA["properties"]["processes"]["items"]["properties"]["role"])
LAWS = _enum(_CONFIG["law"])

IMPL_COLORS = {
    RELAY_ALONE: "#ff7f0e",
    CEILING: "#7f7f7f",
    "valkey-glide": "#1f77b4",
    "iovalkey": "#2ca02c",
    "ioredis": "#d62728",
    "valkey-glide+lease": "#aec7e8",
    "iovalkey+lease": "#98df8a",
    "ioredis+lease": "#ff9896",
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
