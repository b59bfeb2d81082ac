"""The Ratios section: per-round ratios against the relay alone, the peer and quotas-off, and
CPU ms per request, from fixture run files shaped like the harness's."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional

import pytest

from conftest import MIB, WALL, _proc, make_run, with_cpu_ms, write_run
from sluice_report import generate
from sluice_report.headline import cpu_ms_per_request
from sluice_report.load import load_file


def nostr_run(impl: str, rps: float, run: int, relay: str = "reference", *,
              mode: str = "standalone", status: str = "ok",
              gateway_cpu: float = 50.0, relay_cpu: float = 40.0) -> dict[str, Any]:
    data = make_run(impl, mode, "nostr", rps, run=run, status=status,
                    reasons=None if status == "ok" else ["12 connection errors"])
    data["config"]["relayImpl"] = relay
    data["config"]["quota"] = {"points": 1_000_000, "windowSec": 1}
    if impl == "relay-alone":
        data["config"]["client"] = None
        data["clientSettings"] = None
        data["valkey"] = None
        data["processes"] = [_proc("relay", f"{relay}-relay", relay_cpu, 60 * MIB)]
    else:
        data["processes"] = [_proc("gateway", "gateway", gateway_cpu, 90 * MIB),
                             _proc("relay", f"{relay}-relay", relay_cpu, 60 * MIB)]
    return with_cpu_ms(data)


def write(directory: Path, data: dict[str, Any]) -> None:
    c = data["config"]
    relay = c.get("relayImpl", "reference")
    part = "" if relay == "reference" else f"_{relay}"
    write_run(directory, data, f"{c['implementation']}_{c['mode']}_{c['workload']}{part}_"
                               f"{c['connections']}c_{c['durationSec']:g}s_run{c['run']}.json")


def ratio_for(report, label: str, relay: Optional[str] = None):
    return next(r for r in report.headline.nostr if r.label == label
                and (relay is None or r.numerator.relay_impl == relay))


@pytest.fixture
def session(tmp_path: Path) -> Path:
    d = tmp_path / "20261123_010000"
    d.mkdir()
    # Relay alone at 4000/s each round; glide through the gateway at 2000, 2200, 1800.
    for run, (alone, glide, iov) in enumerate([(4000, 2000, 3000), (4000, 2200, 3200),
                                               (4000, 1800, 2800)], start=1):
        write(d, nostr_run("relay-alone", alone, run))
        write(d, nostr_run("valkey-glide", glide, run))
        # iovalkey's run 2 failed: that round has no iovalkey ratio.
        write(d, nostr_run("iovalkey", iov, run, status="failed" if run == 2 else "ok"))
        # Cluster gateways compare with the same relay alone (it has no topology).
        write(d, nostr_run("ioredis", glide / 2, run, mode="cluster"))
        # nostr-rs-relay: through glide only, no relay-alone run with it.
        write(d, nostr_run("valkey-glide", 1000, run, relay="nostr-rs-relay"))
        # HTTP light: peer 2500, quotas-off 5000, glide 3000 then 2500 then 2000.
        write(d, make_run("fastify-rate-limit", "standalone", "light", 2500, run=run))
        write(d, make_run("quotas-off", "standalone", "light", 5000, run=run))
        write(d, make_run("valkey-glide", "standalone", "light", [3000, 2500, 2000][run - 1],
                          run=run))
    return d


def test_nostr_ratio_is_per_round_mean_with_min_and_max(session: Path) -> None:
    report, _, _ = generate(session)
    r = ratio_for(report, "valkey-glide standalone", "reference")
    assert r.rounds == (1, 2, 3)
    assert r.values == pytest.approx((0.5, 0.55, 0.45))
    assert r.mean == pytest.approx(0.5)
    assert (r.min, r.max) == pytest.approx((0.45, 0.55))
    assert r.baseline is not None and r.baseline.implementation == "relay-alone"


def test_a_failed_run_drops_its_round_only(session: Path) -> None:
    report, _, _ = generate(session)
    r = ratio_for(report, "iovalkey standalone")
    assert r.rounds == (1, 3)
    assert r.values == pytest.approx((0.75, 0.7))
    assert r.mean == pytest.approx(0.725)


def test_cluster_gateways_divide_by_the_same_relay_alone(session: Path) -> None:
    report, _, _ = generate(session)
    r = ratio_for(report, "ioredis cluster")
    assert r.values == pytest.approx((0.25, 0.275, 0.225))


def test_sender_only_nostr_runs_are_their_own_scenario_against_the_same_relay_alone(
        tmp_path: Path) -> None:
    d = tmp_path / "20261123_020000"
    d.mkdir()
    rates = [(4000, 2000, 3600, 3400), (4000, 2400, 3800, 3600)]
    for run, (alone, verified, sender_only, by_relay) in enumerate(rates, start=1):
        write(d, nostr_run("relay-alone", alone, run))
        write(d, nostr_run("iovalkey", verified, run))
        for identity, rps, workload in (("ip", sender_only, "nostr-sender-only"),
                                        ("relay-verified", by_relay, "nostr-relay-verified")):
            data = nostr_run("iovalkey", rps, run)
            data["config"]["nostrIdentity"] = identity
            write_run(d, data, f"iovalkey_standalone_{workload}_50c_10s_run{run}.json")
    report, _, _ = generate(d)
    verified = ratio_for(report, "iovalkey standalone")
    sender_only = ratio_for(report, "iovalkey standalone (sender only)")
    by_relay = ratio_for(report, "iovalkey standalone (verified by the relay)")
    assert verified.values == pytest.approx((0.5, 0.6))
    assert sender_only.values == pytest.approx((0.9, 0.95))
    assert by_relay.values == pytest.approx((0.85, 0.9))
    assert sender_only.baseline is verified.baseline is by_relay.baseline
    assert not [w for w in report.warnings if "file name says" in w]


def long_tail(data: dict[str, Any]) -> dict[str, Any]:
    """The same run on the long tail (every event from a new author)."""
    data["config"]["nostrIdentity"] = "pubkey-long-tail"
    return data


def test_the_long_tail_divides_by_the_relay_alone_on_its_own_events(tmp_path: Path) -> None:
    d = tmp_path / "20261127_010000"
    d.mkdir()
    # The relay alone is slower on the long tail's events (a key each) than on nostr's.
    for run, (alone, alone_tail, gw, gw_tail) in enumerate(
            [(4000, 3000, 2000, 900), (4000, 2500, 2400, 1000)], start=1):
        write(d, nostr_run("relay-alone", alone, run))
        write(d, nostr_run("iovalkey", gw, run))
        for impl, rps, cpu in (("relay-alone", alone_tail, 40.0), ("iovalkey", gw_tail, 100.0)):
            data = long_tail(nostr_run(impl, rps, run, gateway_cpu=cpu))
            write_run(d, data, f"{impl}_standalone_nostr-long-tail_50c_10s_run{run}.json")
    report, _, _ = generate(d)
    assert not [w for w in report.warnings if "file name says" in w]
    tail = ratio_for(report, "iovalkey standalone (long tail: every event from a new author)")
    repeat = ratio_for(report, "iovalkey standalone")
    assert tail.values == pytest.approx((0.3, 0.4))
    assert repeat.values == pytest.approx((0.5, 0.6))
    assert tail.baseline is not None and tail.baseline.workload == "nostr-long-tail"
    assert repeat.baseline is not None and repeat.baseline.workload == "nostr"
    # Its CPU per EVENT is set beside the relay's on the long tail too.
    costs = {(own.config.workload, own.config.implementation): other
             for own, other, _ in report.headline.cpu}
    assert costs[("nostr-long-tail", "iovalkey")].config.workload == "nostr-long-tail"


def test_a_long_tail_without_its_relay_alone_is_na_not_the_repeat_writers(
        tmp_path: Path) -> None:
    d = tmp_path / "20261127_020000"
    d.mkdir()
    write(d, nostr_run("relay-alone", 4000, 1))
    write_run(d, long_tail(nostr_run("iovalkey", 900, 1)),
              "iovalkey_standalone_nostr-long-tail_50c_10s_run1.json")
    report, _, _ = generate(d)
    r = ratio_for(report, "iovalkey standalone (long tail: every event from a new author)")
    assert r.mean is None and r.baseline is None
    assert "no relay-alone nostr-long-tail runs" in (r.why_na or "")


def reads(data: dict[str, Any]) -> dict[str, Any]:
    """The same run reading: REQs for pages of stored notes (nostr-reads)."""
    data["config"]["workload"] = "nostr-reads"
    data["reads"] = {"stored": 2000, "limit": 50, "events": 50 * data["counts"]["requests"],
                     "eventsPerSec": 50 * data["rates"]["requestsPerSec"]}
    return data


def test_reads_divide_by_the_relay_alone_reading_the_same_pages(tmp_path: Path) -> None:
    d = tmp_path / "20261207_010000"
    d.mkdir()
    # The relay alone on nostr's writes is faster than on reads: the reads' own baseline counts.
    for run, (alone, alone_reads, gw_reads) in enumerate([(4000, 600, 540), (4000, 500, 450)],
                                                        start=1):
        write(d, nostr_run("relay-alone", alone, run))
        write(d, reads(nostr_run("relay-alone", alone_reads, run)))
        write(d, reads(nostr_run("iovalkey", gw_reads, run)))
    report, _, _ = generate(d)
    assert not [w for w in report.warnings if "file name says" in w]
    r = ratio_for(report, "iovalkey standalone (reads: REQs per second, 50 stored notes each)")
    assert r.values == pytest.approx((0.9, 0.9), rel=1e-3)
    assert r.baseline is not None and r.baseline.workload == "nostr-reads"


def test_no_relay_alone_with_that_relay_is_na_with_the_reason(session: Path) -> None:
    report, _, _ = generate(session)
    r = ratio_for(report, "valkey-glide standalone", "nostr-rs-relay")
    assert r.mean is None and r.values == ()
    assert "no relay-alone nostr runs with the nostr-rs-relay relay" in (r.why_na or "")


def test_http_light_against_the_peer_and_quotas_off(session: Path) -> None:
    report, _, _ = generate(session)
    peer = next(r for r in report.headline.http_vs_peer if r.label == "valkey-glide standalone")
    assert peer.values == pytest.approx((1.2, 1.0, 0.8))
    assert peer.mean == pytest.approx(1.0)
    off = next(r for r in report.headline.http_vs_quotas_off
               if r.label == "valkey-glide standalone")
    assert off.values == pytest.approx((0.6, 0.5, 0.4))


def test_http_without_a_peer_is_na(tmp_path: Path) -> None:
    d = tmp_path / "s"
    d.mkdir()
    for run in (1, 2):
        write(d, make_run("iovalkey", "standalone", "light", 3000, run=run))
    report, html, _ = generate(d)
    [peer] = report.headline.http_vs_peer
    assert peer.mean is None
    assert "no fastify-rate-limit runs in standalone light at 50 connections" == peer.why_na
    assert "n/a" in html.read_text(encoding="utf-8")


def test_cpu_ms_per_request(tmp_path: Path) -> None:
    # 50% of one core over the window, at 1000 responses/s: 0.5 ms of CPU per response.
    data = nostr_run("valkey-glide", 1000, 1, gateway_cpu=50.0, relay_cpu=20.0)
    path = write_run(tmp_path, data, "valkey-glide_standalone_nostr_50c_10s_run1.json")
    run = load_file(path)
    assert cpu_ms_per_request(run, "gateway") == pytest.approx(0.5, rel=1e-3)
    assert cpu_ms_per_request(run, "relay") == pytest.approx(0.2, rel=1e-3)
    assert cpu_ms_per_request(run, "peer") is None
    assert run.counts["requests"] == round(1000 * WALL)


def test_cpu_rows_pair_the_gateway_with_the_peer_and_the_relay_alone(session: Path) -> None:
    report, _, _ = generate(session)
    rows = {(own.config.implementation, own.config.mode, own.config.workload,
             own.config.relay_impl): (own, other, why) for own, other, why in report.headline.cpu}
    own, other, why = rows[("valkey-glide", "standalone", "light", "reference")]
    assert other is not None and other.role == "peer" and why == ""
    assert len(own.values) == 3
    own, other, why = rows[("valkey-glide", "standalone", "nostr", "reference")]
    assert other is not None and other.role == "relay"
    # Relay alone: 40% at 4000/s over every round = 0.1 ms per event.
    assert other.mean == pytest.approx(0.1, rel=1e-3)
    _, other, why = rows[("valkey-glide", "standalone", "nostr", "nostr-rs-relay")]
    assert other is None and "no relay-alone CPU figures with the nostr-rs-relay relay" in why


def test_ratios_come_first_in_the_html_and_in_the_csv(session: Path) -> None:
    _, html_path, csv_path = generate(session)
    html = html_path.read_text(encoding="utf-8")
    assert html.index('id="ratios"') < html.index('id="run"') < html.index('id="summary-')
    assert "EVENT/s through the gateway ÷ relay alone" in html
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    glide = next(r for r in rows if r["implementation"] == "valkey-glide"
                 and r["workload"] == "nostr" and r["relay_impl"] == "reference")
    assert float(glide["ratio_vs_relay_alone_mean"]) == pytest.approx(0.5)
    assert float(glide["ratio_vs_relay_alone_min"]) == pytest.approx(0.45)
    assert float(glide["ratio_vs_relay_alone_max"]) == pytest.approx(0.55)
    assert float(glide["front_cpu_ms_per_request"]) > 0
    nrr = next(r for r in rows if r["relay_impl"] == "nostr-rs-relay")
    assert nrr["ratio_vs_relay_alone_mean"] == ""  # no baseline: empty, never 0
    light = next(r for r in rows if r["implementation"] == "valkey-glide"
                 and r["workload"] == "light")
    assert float(light["ratio_vs_peer_paired_mean"]) == pytest.approx(1.0)
    assert float(light["ratio_vs_quotas_off_paired_mean"]) == pytest.approx(0.5)
    alone = next(r for r in rows if r["implementation"] == "relay-alone")
    assert alone["relay_impl"] == "reference" and alone["front_cpu_ms_per_request"] == ""


def test_third_party_relay_runs_are_their_own_configuration(session: Path) -> None:
    report, _, _ = generate(session)
    glide_nostr = [c for c in report.configs
                   if c.implementation == "valkey-glide" and c.workload == "nostr"]
    assert sorted(c.relay_impl for c in glide_nostr) == ["nostr-rs-relay", "reference"]
    assert not [w for w in report.warnings if "file name says" in w]
