"""summary.csv columns: the one place they are documented.

The report's column table, this docstring (filled in below) and docs/REPORT-COLUMNS.md all
come from COLUMNS. Regenerate the Markdown with:

    .venv/bin/python scripts/sluice_report/columns.py > docs/REPORT-COLUMNS.md

Columns:
"""

from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    name: str
    unit: str
    meaning: str


# Every "median" is over the configuration's ok runs only; a failed run never enters a figure.
COLUMNS: tuple[Column, ...] = (
    Column("implementation", "-", "valkey-glide, iovalkey or ioredis (sluice with that client), "
           "quotas-off (sluice, quotas disabled: the ceiling), fastify-rate-limit (the peer) or "
           "relay-alone (the load straight to the relay, no gateway: Nostr)"),
    Column("client", "-", "Valkey client behind the quota check; empty for quotas-off"),
    Column("mode", "-", "Valkey topology: standalone or cluster"),
    Column("workload", "-", "light, heavy, flood, nostr or adaptive-<law>"),
    Column("law", "-", "adaptive workloads: none, pid or lead; empty otherwise"),
    Column("relay_impl", "-", "the relay measured: reference (sluice's own) or nostr-rs-relay "
           "(built from crates.io; Nostr only)"),
    Column("transport", "-", "http (autocannon) or websocket (nostr)"),
    Column("connections", "connections", "concurrent client connections of the load"),
    Column("duration_s", "s", "measured window asked for, per run"),
    Column("keys", "identities", "distinct client identities in the load"),
    Column("distribution", "-", "uniform or zipf(s): how the load picks identities"),
    Column("in_memory_block", "true/false", "gateway blocks known over-limit clients in memory"),
    Column("runs", "runs", "run files found for this configuration"),
    Column("ok_runs", "runs", "runs with status ok: the only ones aggregated"),
    Column("failed_runs", "runs", "runs with status failed: listed in the report, never aggregated"),
    Column("status", "-", "ok (every run ok), partial (some failed) or failed (all failed: no figures)"),
    Column("req_per_s_median", "responses/s", "median of (responses / measured wall time); "
           "a response is any status code, 2xx or not"),
    Column("req_per_s_min", "responses/s", "lowest run"),
    Column("req_per_s_max", "responses/s", "highest run"),
    Column("req_per_s_stddev", "responses/s", "sample standard deviation over ok runs (n-1); "
           "empty with fewer than 2 ok runs"),
    Column("req_per_s_cv_pct", "%", "coefficient of variation: stddev / mean x 100"),
    Column("high_variance", "true/false", "true when req_per_s_cv_pct > 10; empty with fewer "
           "than 2 ok runs (spread unknown)"),
    Column("ok_per_s_median", "responses/s", "2xx responses / wall time, median"),
    Column("limited_per_s_median", "responses/s", "429 responses / wall time, median"),
    Column("other_non2xx_per_s_median", "responses/s", "non-2xx responses other than 429 / wall "
           "time, median"),
    Column("errors_per_s_median", "errors/s", "connection errors and timeouts (no response) / "
           "wall time, median"),
    Column("rejected_share_pct", "%", "429 responses / all responses x 100, median"),
    Column("latency_p50_ms", "ms", "median response latency, median over runs (empty for paced "
           "adaptive load)"),
    Column("latency_p90_ms", "ms", "90th percentile latency, median over runs"),
    Column("latency_p99_ms", "ms", "99th percentile latency, median over runs"),
    Column("latency_max_ms", "ms", "largest latency, median over runs"),
    Column("latency_mean_ms", "ms", "mean latency, median over runs"),
    Column("gateway_cpu_pct", "% of one core", "gateway processes' CPU, mean over the window, "
           "summed over gateway processes (100 = one core busy)"),
    Column("gateway_rss_mib", "MiB", "gateway processes' resident memory, mean over the window, "
           "summed"),
    Column("peer_cpu_pct", "% of one core", "peer baseline (fastify-rate-limit) server CPU"),
    Column("peer_rss_mib", "MiB", "peer baseline server resident memory"),
    Column("relay_cpu_pct", "% of one core", "relay processes' CPU, summed"),
    Column("relay_rss_mib", "MiB", "relay processes' resident memory, summed"),
    Column("feed_cpu_pct", "% of one core", "pressure feed process CPU (adaptive runs sample it "
           "beside relay, gateways and Valkey); empty where it was not sampled"),
    Column("feed_rss_mib", "MiB", "pressure feed process resident memory"),
    Column("valkey_cpu_pct", "% of one core", "Valkey CPU summed over every node (cluster: all "
           "primaries and replicas)"),
    Column("valkey_rss_mib", "MiB", "Valkey resident memory summed over every node"),
    Column("valkey_cmds_per_request", "commands/response", "commands Valkey executed / "
           "responses, median: INFO commandstats over every primary, after minus before, so the "
           "commands a script runs inside Valkey count too (replication and the harness's own "
           "INFO left out)"),
    Column("valkey_round_trips_per_request", "round trips/response", "script calls (EVAL, "
           "EVALSHA, FCALL and their _ro forms) / responses, median: the round trips that carry "
           "the quota check; 0 without scripts (quotas-off), below 1 when the in-memory block "
           "answers over-limit clients without Valkey; empty for run files that predate "
           "valkey.scriptCalls"),
    Column("ratio_vs_quotas_off", "x", "req_per_s_median / quotas-off's, same mode, workload "
           "and connections (1 = no cost)"),
    Column("ratio_vs_best_client", "x", "req_per_s_median / the fastest sluice client's, same "
           "mode, workload and connections (1 = fastest)"),
    Column("ratio_vs_peer", "x", "req_per_s_median / fastify-rate-limit's, same mode, workload "
           "and connections (> 1 = sluice faster)"),
    Column("ratio_vs_relay_alone_mean", "x", "Nostr: EVENT/s through this gateway / relay "
           "alone (same relay, connections), per round (run r of each, both ok), mean over "
           "rounds; empty without relay-alone runs"),
    Column("ratio_vs_relay_alone_min", "x", "lowest round of ratio_vs_relay_alone"),
    Column("ratio_vs_relay_alone_max", "x", "highest round of ratio_vs_relay_alone"),
    Column("ratio_vs_peer_paired_mean", "x", "HTTP light, sluice clients: req/s / "
           "fastify-rate-limit's in the same round, mean over rounds"),
    Column("ratio_vs_peer_paired_min", "x", "lowest round of ratio_vs_peer_paired"),
    Column("ratio_vs_peer_paired_max", "x", "highest round of ratio_vs_peer_paired"),
    Column("ratio_vs_quotas_off_paired_mean", "x", "HTTP light, sluice clients: req/s / "
           "quotas-off's in the same round, mean over rounds"),
    Column("ratio_vs_quotas_off_paired_min", "x", "lowest round of ratio_vs_quotas_off_paired"),
    Column("ratio_vs_quotas_off_paired_max", "x", "highest round of ratio_vs_quotas_off_paired"),
    Column("front_cpu_ms_per_request", "ms/response", "CPU time of the gateway (or peer) over "
           "the window / responses, mean over ok runs"),
    Column("relay_cpu_ms_per_request", "ms/response", "CPU time of the relay over the window / "
           "responses, mean over ok runs"),
    Column("adaptive_peak_u_over_target", "x", "adaptive: peak relay memory / target, median"),
    Column("adaptive_seconds_above_target_s", "s", "adaptive: time with memory above target, "
           "median"),
    Column("adaptive_emergency_entries", "entries", "adaptive: times the relay entered "
           "emergency mode, median"),
    Column("adaptive_accepted_over_sustainable", "x", "adaptive: admitted write rate / the "
           "relay's sustainable rate, median"),
    Column("adaptive_m_peak_to_peak", "-", "adaptive: multiplier swing in steady overload, "
           "median"),
    Column("adaptive_propagation_p99_ms", "ms", "adaptive: p99 time from the feed's sample to a "
           "gateway applying it, median"),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)


def markdown() -> str:
    """docs/REPORT-COLUMNS.md, generated from COLUMNS."""
    lines = [
        "# summary.csv columns",
        "",
        "Generated from `scripts/sluice_report/columns.py` (the one place they are defined);",
        "regenerate with `.venv/bin/python scripts/sluice_report/columns.py > docs/REPORT-COLUMNS.md`.",
        "One row per configuration (implementation, mode, workload, connections, duration).",
        "Rates are counts divided by the harness's measured wall time, never a tool's average.",
        "Medians are over ok runs only; empty cells mean no data (for example, all runs failed).",
        "",
        "| column | unit | meaning |",
        "| --- | --- | --- |",
    ]
    lines += [f"| `{c.name}` | {c.unit} | {c.meaning} |" for c in COLUMNS]
    return "\n".join(lines) + "\n"


__doc__ += "\n".join(f"    {c.name} ({c.unit}): {c.meaning}" for c in COLUMNS) + "\n"

if __name__ == "__main__":
    print(markdown(), end="")
