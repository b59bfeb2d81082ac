"""The report's names come from the run file's schema, which the harness generates from its
workload table (WORKLOAD_SPECS): every workload the plan can run is one the report orders."""

from __future__ import annotations

import json
from pathlib import Path

from sluice_report import names
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
