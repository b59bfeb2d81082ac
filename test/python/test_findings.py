"""Key findings name what the data says, with its numbers."""

from __future__ import annotations

from conftest import make_run, write_lease_results, write_run

from sluice_report import analyse


def _texts(report, topic):
    return [f.text for f in report.findings if f.topic == topic]


def test_fastest_client_named_with_its_number(built_report):
    report, _, _ = built_report
    texts = _texts(report, "Fastest client")
    standalone_light = [t for t in texts if t.startswith("Standalone, light, 50 connections")]
    assert len(standalone_light) == 1
    t = standalone_light[0]
    assert "iovalkey is the fastest client at 3,976 req/s" in t
    assert "26% ahead of valkey-glide (3,159)" in t and "30% ahead of ioredis (3,070)" in t
    # The failed run is not in the cluster figure: median of the 2 ok runs.
    cluster = [t for t in texts if t.startswith("Cluster, light")][0]
    assert "iovalkey is the fastest client at 3,518 req/s (median of 2 runs)" in cluster


def test_fastest_client_follows_the_data(tmp_path):
    for run, j in enumerate((0.99, 1.0, 1.01), 1):
        write_run(tmp_path, make_run("valkey-glide", rps=5000 * j, run=run, wall=10.0))
        write_run(tmp_path, make_run("ioredis", rps=2000 * j, run=run, wall=10.0))
    t = _texts(analyse(tmp_path), "Fastest client")[0]
    assert "valkey-glide is the fastest client at 5,000 req/s" in t
    assert "150% ahead of ioredis (2,000)" in t
    assert "do not settle" not in t


def test_overlapping_ranges_are_called_unsettled(tmp_path):
    for run, (a, b) in enumerate([(1000, 990), (1010, 1005), (1100, 1090)], 1):
        write_run(tmp_path, make_run("iovalkey", rps=a, run=run, wall=10.0))
        write_run(tmp_path, make_run("ioredis", rps=b, run=run, wall=10.0))
    t = _texts(analyse(tmp_path), "Fastest client")[0]
    assert "iovalkey is the fastest client" in t and "do not settle that order" in t


def test_quota_cost_peer_flood_adaptive_variance_failures(built_report):
    report, _, _ = built_report
    cost = " ".join(_texts(report, "Cost of quotas"))
    assert "iovalkey keeps 0.86 of the quotas-off ceiling (3,976 of 4,640 req/s)" in cost
    assert "ioredis keeps the least, 0.66 (3,070)" in cost
    peer = " ".join(_texts(report, "Peer baseline"))
    assert "fastify-rate-limit, answers 2,500 req/s" in peer and "0.63× iovalkey (3,976)" in peer
    flood = " ".join(_texts(report, "Rejection path"))
    assert "90.0% of responses were 429" in flood and "valkey-glide 5,351 req/s (1.69×" in flood
    valkey = " ".join(_texts(report, "Valkey round trips"))
    assert "valkey-glide: 1.00 round trips per response" in valkey
    assert "quotas-off: no round trips, no commands (no quota check)." in valkey
    adaptive = " ".join(_texts(report, "Adaptive scenario"))
    assert "no adaptation peaked at 2.79× the memory target" in adaptive
    assert "sluice lead law peaked at 0.96× the memory target, 0.0 s above it, 0 emergency entries" in adaptive
    variance = " ".join(_texts(report, "Variance"))
    assert "quotas-off cluster light 50c 10s (CV 25.2%, 3,400–5,700 req/s)" in variance
    failed = " ".join(_texts(report, "Failed runs"))
    assert "4 of 87 runs failed" in failed
    assert "iovalkey cluster light 50c 10s run 2 (12 connection errors" in failed
    assert "valkey-glide cluster heavy 50c 10s: all 3 runs failed" in failed
    quality = " ".join(_texts(report, "Data quality"))
    assert "iovalkey_standalone_heavy_50c_10s_run4.json" in quality


def test_no_finding_without_data(tmp_path):
    write_run(tmp_path, make_run("valkey-glide", rps=1000.0, wall=10.0))
    report = analyse(tmp_path)
    topics = {f.topic for f in report.findings}
    # One configuration, one run: nothing to compare, no peer, no flood, no adaptive.
    assert not topics & {"Fastest client", "Cost of quotas", "Peer baseline", "Rejection path",
                         "Adaptive scenario"}
    assert any("single ok run" in f.text for f in report.findings)


def test_round_trips_are_the_headline_executed_commands_the_detail(built_report):
    report, _, _ = built_report
    texts = _texts(report, "Valkey round trips")
    assert texts[0].startswith("A round trip is one script call (EVAL, EVALSHA or FCALL)")
    # Round trips first, then what Valkey executed for them, by command; flood kept apart.
    assert ("valkey-glide: 1.00 round trips per response, 4.00 commands executed (fcall 1.00, "
            "incrby 1.00, pttl 1.00, set 1.00); round trips the same in all 4 configurations."
            ) in texts
    assert ("fastify-rate-limit: 1.00 round trips per response, 3.00 commands executed "
            "(evalsha 1.00, incr 1.00, pexpire 0.80, pttl 0.20)") in " ".join(texts)
    flood = [t for t in texts if t.startswith("Under flood")]
    assert len(flood) == 1
    assert "valkey-glide standalone 0.10 (0.40 executed)" in flood[0]
    assert "Below one with the in-memory block on" in flood[0]
    assert "Valkey commands" not in {f.topic for f in report.findings}


def test_flood_round_trips_without_block_are_not_explained_by_it(tmp_path):
    write_run(tmp_path, make_run("iovalkey", "standalone", "flood", 1000.0, wall=10.0,
                                 limited_share=0.9, round_trips=1.0))
    (t,) = [t for t in _texts(analyse(tmp_path), "Valkey round trips")
            if t.startswith("Under flood")]
    assert "iovalkey standalone 1.00 (4.00 executed)" in t and "Below one" not in t


def test_client_settings_finding(built_report):
    report, _, _ = built_report
    (t,) = _texts(report, "Client settings")
    assert t.startswith("Every quota client ran with the same settings")
    assert "command timeout ms 1000 (valkey-glide, iovalkey, ioredis, fastify-rate-limit)" in t
    assert ("in-flight limit 1000 (valkey-glide), n/a: not a setting of this library "
            "(iovalkey, ioredis, fastify-rate-limit)") in t


def test_quota_cost_above_the_ceiling_is_not_called_kept(tmp_path):
    # Noisy runs: the client beats the quotas-off ceiling; "keeps 1.25 of" would read wrong.
    for run, j in enumerate((0.99, 1.0, 1.01), 1):
        write_run(tmp_path, make_run("quotas-off", rps=2000 * j, run=run, wall=10.0))
        write_run(tmp_path, make_run("ioredis", rps=2500 * j, run=run, wall=10.0))
    (t,) = _texts(analyse(tmp_path), "Cost of quotas")
    assert "ioredis answers 1.25× the quotas-off ceiling (2,500 against 2,000 req/s)" in t
    assert "do not measure the quota check's cost" in t and "keeps 1.25" not in t
    write_run(tmp_path, make_run("iovalkey", rps=2200.0, run=1, runs=1, wall=10.0))
    (t,) = _texts(analyse(tmp_path), "Cost of quotas")
    assert "iovalkey is the least above it, 1.10 (2,200)" in t


def test_lease_clients_are_compared_beside_the_plain_ones(lease_report):
    report, _, _ = lease_report
    fastest = " ".join(_texts(report, "Fastest client"))
    assert ("Standalone, light, 50 connections: iovalkey+lease is the fastest client at "
            "4,408 req/s") in fastest
    assert "6% ahead of valkey-glide+lease (4,176), 11% ahead of iovalkey (3,976)" in fastest
    cost = " ".join(_texts(report, "Cost of quotas"))
    assert "iovalkey+lease keeps 0.95 of the quotas-off ceiling (4,408 of 4,640 req/s)" in cost
    peer = " ".join(_texts(report, "Peer baseline"))
    assert "0.57× iovalkey+lease (4,408)" in peer


def test_lease_accounting_finding_when_nothing_is_over_admitted(lease_report):
    report, _, _ = lease_report
    (t,) = [t for t in _texts(report, "Quota leases") if "admitted" in t]
    assert t.startswith("No lease run admitted a write beyond the points Valkey granted "
                        "(over-admitted 0 in all 12 runs with lease accounting, "
                        "4 configurations).")
    assert "the bound on under-admission: 2.0% of those leased" in t
    assert "⚠" not in t


def test_over_admission_is_a_red_flag_naming_each_run(tmp_path):
    d = write_lease_results(tmp_path / "s", {("iovalkey+lease", "cluster", "light", 2): 3})
    write_run(d, make_run("valkey-glide+lease", rps=4176.0, run=3, status="failed",
                          reasons=["12 connection errors"], over_admitted=5))
    report = analyse(d)
    (t,) = [t for t in _texts(report, "Quota leases") if "admitted" in t]
    assert t.startswith("⚠ Over-admission: 2 lease runs admitted writes beyond the points "
                        "Valkey granted, which must never happen:")
    assert "iovalkey+lease cluster light 50c 10s run 2, 3 of 41,483 writes" in t
    assert "valkey-glide+lease standalone light 50c 10s run 3, 5 of" in t
    assert "(a failed run)" in t and "No lease run" not in t
    assert "these runs measure no valid throughput until the lease accounting is mended." in t


def test_lease_round_trips_against_the_plain_client(lease_report):
    report, _, _ = lease_report
    texts = [t for t in _texts(report, "Quota leases") if "round trips" in t]
    assert ("Standalone, light, 50 connections: Valkey round trips per response with leases, "
            "valkey-glide+lease 0.05 against valkey-glide's 1.00 (5.0% of them) and "
            "iovalkey+lease 0.05 against iovalkey's 1.00 (5.0% of them).") in texts
    assert ("Standalone, flood, 50 connections: Valkey round trips per response with leases, "
            "iovalkey+lease 0.02 against iovalkey's 0.10 (20.0% of them).") in texts
    assert len(texts) == 3  # and cluster light


def test_lease_round_trips_without_the_plain_client(tmp_path):
    write_run(tmp_path, make_run("ioredis+lease", rps=3000.0, runs=1))
    (t,) = [t for t in _texts(analyse(tmp_path), "Quota leases") if "round trips" in t]
    assert "ioredis+lease 0.05 (no ioredis round trips here to compare with)." in t


def test_no_lease_finding_without_lease_runs(built_report):
    report, _, _ = built_report
    assert _texts(report, "Quota leases") == []


def _at_limit_run(run: int, over: int = 0, status: str = "ok") -> dict:
    """A nostr-at-limit run: 1,000 authors sent past a quota of 10, `over` stored past it."""
    data = make_run("iovalkey", workload="nostr", run=run, runs=2, limited_share=0.5,
                    status=status)
    data["config"].update(nostrIdentity="pubkey-at-limit",
                          freshEvents={"maxPerSec": 8000, "authors": 1000})
    data["pastLimit"] = {"authorLimit": 10, "authors": 1000, "authorsAtLimit": 1000 - over,
                         "maxStored": 11 if over else 10, "authorsOverAdmitted": over,
                         "senderLimit": 1_000_000, "senderStored": 10_000 + over,
                         "senderOverAdmitted": 0}
    return data


def test_limits_held_when_no_author_went_past_its_limit(tmp_path):
    for run in (1, 2):
        write_run(tmp_path, _at_limit_run(run))
    (t,) = _texts(analyse(tmp_path), "Limits held")
    assert t == ("No author or sender was admitted past its limit in 2 runs of authors sending "
                 "past their quota (10 events each): 2,000 of 2,000 authors were stored "
                 "exactly up to it, none beyond.")


def test_an_event_stored_past_a_limit_is_a_red_flag_failed_runs_included(tmp_path):
    write_run(tmp_path, _at_limit_run(1))
    write_run(tmp_path, _at_limit_run(2, over=3, status="failed"))
    (t,) = _texts(analyse(tmp_path), "Limits held")
    assert t.startswith("⚠ Over-admission: 1 run stored events past a limit, which must never "
                        "happen: iovalkey:standalone run 2: 3 past an author's limit, 0 past "
                        "the sender's.")
