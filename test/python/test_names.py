"""The report's names come from the run file's schema, which the harness generates from its
tables (WORKLOAD_SPECS, the clients' CLIENTS, the laws' LAWS): every workload, client and law
the plan can run is one the report orders, labels and colours."""

from __future__ import annotations

import json
from pathlib import Path

from sluice_report import charts, names
from sluice_report.load import scenario

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "run-file.schema.json")
                    .read_text(encoding="utf-8"))


def test_workloads_are_the_schemas_names_in_its_order():
    named = SCHEMA["$defs"]["workloadName"]
    assert names.WORKLOADS == tuple(named["enum"])
    # Each load the run file records is a name too; the variants follow the load they vary.
    loads = SCHEMA["properties"]["config"]["properties"]["workload"]["enum"]
    assert set(loads) <= set(names.WORKLOADS)
    for variant in (names.SENDER_ONLY, names.RELAY_VERIFIED):
        assert names.WORKLOADS.index(variant) > names.WORKLOADS.index("nostr")
        assert names.workload_rank(variant) < names.workload_rank("adaptive-none")


def test_a_run_is_named_by_the_variant_its_identity_picks():
    def workload_of(**cfg):
        return scenario({"implementation": "valkey-glide", **cfg})[1]

    assert workload_of(workload="nostr", nostrIdentity="ip") == names.SENDER_ONLY
    assert workload_of(workload="nostr", nostrIdentity="relay-verified") == names.RELAY_VERIFIED
    assert workload_of(workload="nostr", nostrIdentity="pubkey") == "nostr"
    assert workload_of(workload="nostr") == "nostr"  # files from before nostrIdentity
    assert workload_of(workload="light", rate=3000) == "light-rate3000"


def test_clients_are_the_schemas_names_with_their_labels_and_colours():
    named = SCHEMA["$defs"]["clientName"]
    assert names.VALKEY_CLIENTS == tuple(named["enum"])
    assert names.CLIENTS == (*named["enum"], *(f"{c}+lease" for c in named["enum"]))
    for client in names.CLIENTS:
        assert names.impl_color(client) == names.IMPL_COLORS[client]
    assert len(set(names.IMPL_COLORS.values())) == len(names.IMPL_COLORS)
    assert charts.SHORT["valkey-glide"] == named["x-labels"]["valkey-glide"] == "glide"
    assert "glide = valkey-glide" in charts.SHORT_NOTE
    assert names.NO_INFLIGHT_SETTING == set(named["x-no-inflight-limit"])
    assert "valkey-glide" not in names.NO_INFLIGHT_SETTING


def test_laws_are_the_schemas_names_with_their_labels_and_colours():
    named = SCHEMA["$defs"]["lawName"]
    assert names.LAWS == tuple(named["enum"]) and names.LAWS[0] == names.NO_ADAPTATION
    assert names.LAW_LABELS == named["x-labels"]
    assert set(names.LAW_COLORS) == set(names.LAWS)
    assert len(set(names.LAW_COLORS.values())) == len(names.LAWS)
