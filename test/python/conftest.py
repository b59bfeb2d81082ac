"""A synthetic results directory shaped like the harness's (docs/RESULTS-FORMAT.md).

Run r of a configuration reaches base x JITTER[r], so the median of three ok runs is exactly
the base figure below, and tests can state expected numbers by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from sluice_report.names import is_leased, plain_of  # noqa: E402

JITTER = {1: 0.98, 2: 1.0, 3: 1.03}
WALL = 10.02
DURATION = 10
CONNECTIONS = 50

# Median req/s per (implementation, mode, workload): the figures the tests check.
BASE = {
    ("quotas-off", "standalone", "light"): 4640,
    ("valkey-glide", "standalone", "light"): 3159,
    ("iovalkey", "standalone", "light"): 3976,
    ("ioredis", "standalone", "light"): 3070,
    ("fastify-rate-limit", "standalone", "light"): 2500,
    ("quotas-off", "cluster", "light"): 4600,  # high variance: runs below
    ("valkey-glide", "cluster", "light"): 2900,
    ("iovalkey", "cluster", "light"): 3500,  # run 2 failed
    ("ioredis", "cluster", "light"): 2700,
    ("fastify-rate-limit", "cluster", "light"): 2100,
    ("valkey-glide", "standalone", "flood"): 5351,
    ("iovalkey", "standalone", "flood"): 5604,
    ("ioredis", "standalone", "flood"): 4969,
    ("valkey-glide", "cluster", "flood"): 5000,
    ("iovalkey", "cluster", "flood"): 5200,
    ("ioredis", "cluster", "flood"): 4700,
    ("quotas-off", "standalone", "heavy"): 1200,
    ("valkey-glide", "standalone", "heavy"): 1150,
    ("iovalkey", "standalone", "heavy"): 1170,
    ("ioredis", "standalone", "heavy"): 1140,
    ("fastify-rate-limit", "standalone", "heavy"): 1000,
    ("valkey-glide", "cluster", "heavy"): 900,  # every run failed
    ("quotas-off", "standalone", "nostr"): 3000,
    ("valkey-glide", "standalone", "nostr"): 2400,
    ("iovalkey", "standalone", "nostr"): 2600,
    ("ioredis", "standalone", "nostr"): 2300,
}
HIGH_VARIANCE_RUNS = {1: 3400.0, 2: 4600.0, 3: 5700.0}
FAILED_RUN = ("iovalkey", "cluster", "light", 2)
ALL_FAILED = ("valkey-glide", "cluster", "heavy")
ADAPTIVE_LAWS = ("none", "pid", "lead")
MIB = 2**20
FEED_CPU, FEED_RSS = 4.0, 40 * MIB

# What one round trip (one script call) runs inside Valkey, per implementation, as the
# harness's commandstats see it: glide's FCALL and the others' EVALSHA run SET, PTTL and
# INCRBY inside (4 executed per trip); the peer's EVALSHA runs INCR and PEXPIRE or PTTL (3).
SCRIPT_MIX = {
    "valkey-glide": {"fcall": 1.0, "set": 1.0, "pttl": 1.0, "incrby": 1.0},
    "iovalkey": {"evalsha": 1.0, "set": 1.0, "pttl": 1.0, "incrby": 1.0},
    "ioredis": {"evalsha": 1.0, "set": 1.0, "pttl": 1.0, "incrby": 1.0},
    "fastify-rate-limit": {"evalsha": 1.0, "incr": 1.0, "pexpire": 0.8, "pttl": 0.2},
}
# +lease: a lease script call takes points for many writes, so about one round trip in 20
# responses (one in 50 under flood, where the in-memory block answers most). Of the points
# leased, UNSPENT_SHARE lapsed or were held at the end, RETURNED_SHARE were handed back.
LEASE_ROUND_TRIPS, LEASE_FLOOD_ROUND_TRIPS = 0.05, 0.02
UNSPENT_SHARE, RETURNED_SHARE = 0.02, 0.03
# Every quota client got command timeout 1000 ms, connect timeout 5000 ms; only glide has an
# in-flight limit (iovalkey and ioredis record null: not a setting of theirs).
COMMAND_TIMEOUT_MS, CONNECT_TIMEOUT_MS, INFLIGHT = 1000, 5000, 1000


def client_settings(implementation: str, mode: str) -> dict[str, Any]:
    """clientSettings as the harness records them, each library in its own words."""
    nodes = ["127.0.0.1:7200"] if mode == "cluster" else ["127.0.0.1:6380"]
    if implementation == "fastify-rate-limit":
        return {"implementation": implementation, "client": "ioredis", "mode": mode,
                "nodes": nodes, "commandTimeoutMs": COMMAND_TIMEOUT_MS,
                "connectTimeoutMs": CONNECT_TIMEOUT_MS, "maxRetriesPerRequest": 1,
                "autoPipelining": False, "plugin": "@fastify/rate-limit",
                "undici": {"connections": 128, "pipelining": 1}}
    library = "ioredis" if implementation == "quotas-off" else plain_of(implementation)
    if library == "valkey-glide":
        own = {"requestTimeoutMs": COMMAND_TIMEOUT_MS, "connectionTimeoutMs": CONNECT_TIMEOUT_MS,
               "inflightRequestsLimit": INFLIGHT, "protocol": "RESP3"}
    else:
        own = {"commandTimeoutMs": COMMAND_TIMEOUT_MS, "connectTimeoutMs": CONNECT_TIMEOUT_MS,
               "inflightRequestsLimit": None, "maxRetriesPerRequest": 1, "autoPipelining": True}
    out = {"client": library, "mode": mode, "nodes": nodes,
           "settings": {"client": library, "mode": mode, **own}}
    return {"quotas": "off", **out} if implementation == "quotas-off" else out


def make_run(implementation: str = "valkey-glide", mode: str = "standalone",
             workload: str = "light", rps: float = 1000.0, *, run: int = 1, runs: int = 3,
             connections: int = CONNECTIONS, duration: float = DURATION, wall: float = WALL,
             status: str = "ok", reasons: Optional[list[str]] = None,
             limited_share: float = 0.0, round_trips: Optional[float] = None,
             over_admitted: int = 0) -> dict[str, Any]:
    """One run file's content, its rates stated as the harness states them (ratesOf).

    round_trips: script calls per response (default 1, 0.1 under flood, 0 for quotas-off;
    +lease: LEASE_ROUND_TRIPS, LEASE_FLOOD_ROUND_TRIPS); each runs SCRIPT_MIX inside Valkey.
    over_admitted: +lease, writes admitted beyond the points Valkey granted.
    """
    requests = round(rps * wall)
    limited = round(requests * limited_share)
    client = None if implementation == "quotas-off" else (
        "ioredis" if implementation == "fastify-rate-limit" else plain_of(implementation))
    adaptive = workload.startswith("adaptive-")
    if round_trips is None:
        round_trips = 0.0 if implementation == "quotas-off" else (
            0.1 if workload == "flood" else 1.0)
        if is_leased(implementation):
            flood = workload == "flood"
            round_trips = LEASE_FLOOD_ROUND_TRIPS if flood else LEASE_ROUND_TRIPS
    script_calls = round(requests * round_trips)
    mix = SCRIPT_MIX.get(implementation) or SCRIPT_MIX.get(client or "", {})
    commands = {k: round(script_calls * per) for k, per in mix.items()}
    commands = {k: v for k, v in commands.items() if v}
    calls = sum(commands.values())
    front = "peer" if implementation == "fastify-rate-limit" else "gateway"
    n_valkey = 6 if mode == "cluster" else 1
    processes = [
        _proc(front, front, 80 + rps / 200, 90 * MIB),
        _proc("relay", "relay-a", 20, 60 * MIB),
        *[_proc("valkey", f"valkey 127.0.0.1:{7200 + i} ({'primary' if i < 3 else 'replica'})",
                15 * round_trips + 0.5, 12 * MIB) for i in range(n_valkey)],
    ]
    if adaptive:
        processes.append(_proc("gateway", "gateway-2", 30, 85 * MIB))
        processes.append(_proc("feed", "feed", FEED_CPU, FEED_RSS))
    lat_p50 = connections / rps * 1000
    data: dict[str, Any] = {
        "schema": "sluice-bench-run/1",
        "status": status,
        "failureReasons": reasons or [],
        "config": {
            "implementation": implementation, "client": client, "mode": mode,
            "workload": workload,
            "transport": "websocket" if workload == "nostr" else "http",
            "connections": connections, "durationSec": duration, "warmupSec": 3,
            "run": run, "runs": runs, "keys": 10000, "distribution": "uniform",
            "zipfExponent": None, "floodShare": 0.9 if workload == "flood" else None,
            "quota": {"points": 100, "windowSec": 1}, "inMemoryBlock": True,
            "relayWorkIterations": 2000 if workload == "heavy" else 0,
            "law": workload.split("-", 1)[1] if adaptive else None,
            "seed": 1,
        },
        "clientSettings": client_settings(implementation, mode),
        "startedAt": f"2026-11-22T10:{run:02d}:00.000Z",
        "finishedAt": f"2026-11-22T10:{run:02d}:13.100Z",
        "machine": {"cpus": 2, "cpuModel": "AMD EPYC", "memGiB": 24, "kernel": "6.1.0",
                    "node": "v20.20.2"},
        "versions": {"sluice": "0.1.0", "valkey": "9.1.2", "rate-limiter-flexible": "11.4.0"},
        "wallSeconds": wall,
        "counts": {"requests": requests, "ok2xx": requests - limited, "limited429": limited,
                   "otherNon2xx": 0, "errors": 0, "timeouts": 0, "otherStatuses": {}},
        "rates": {"requestsPerSec": requests / wall, "okPerSec": (requests - limited) / wall,
                  "limitedPerSec": limited / wall, "otherNon2xxPerSec": 0, "errorsPerSec": 0,
                  "limitedShare": limited / requests if requests else 0},
        "latencyMs": (None
                      if adaptive else
                      {"p50": round(lat_p50, 2), "p90": round(lat_p50 * 1.5, 2),
                       "p99": round(lat_p50 * 3, 2), "max": round(lat_p50 * 10, 2),
                       "mean": round(lat_p50 * 1.1, 2)}),
        "processes": processes,
        "valkey": {"commands": commands, "calls": calls,
                   "perRequest": calls / requests if requests else None,
                   "scriptCalls": script_calls,
                   "scriptCallsPerRequest": script_calls / requests if requests else None},
        "leases": (lease_accounting(requests - limited, over_admitted)
                   if is_leased(implementation) else None),
        "timeseries": None,
        "adaptive": None,
    }
    if adaptive:
        data["timeseries"], data["adaptive"] = _adaptive_series(workload.split("-", 1)[1], run)
    return with_cpu_ms(data)


def lease_accounting(admitted: int, over_admitted: int = 0) -> dict[str, int]:
    """leases as the harness states them (leaseAccounting): every admitted write spent a point;
    of the points leased, RETURNED_SHARE were handed back and UNSPENT_SHARE lapsed (half) or
    were held at the end (half). With over_admitted, Valkey granted that many points fewer than
    were spent: none is held and the writes beyond them are over-admitted."""
    leased = round(admitted / (1 - UNSPENT_SHARE - RETURNED_SHARE))
    returned = round(leased * RETURNED_SHARE)
    expired = round(leased * UNSPENT_SHARE / 2)
    if over_admitted:
        leased = returned + expired + admitted - over_admitted
    spendable = leased - returned - expired
    held = max(0, spendable - admitted)
    return {"leased": leased, "spent": admitted, "returned": returned, "expired": expired,
            "held": held, "overAdmitted": max(0, admitted - spendable), "unspent": expired + held}


def with_cpu_ms(data: dict[str, Any]) -> dict[str, Any]:
    """cpuMs and cpuMsPerRequest of every process, as the harness states them."""
    requests = (data.get("counts") or {}).get("requests") or 0
    for p in data["processes"]:
        cpu_ms = p["cpuPercent"]["mean"] / 100 * data["wallSeconds"] * 1000
        p["cpuMs"] = round(cpu_ms, 1)
        p["cpuMsPerRequest"] = round(cpu_ms / requests, 4) if requests else None
    return data


def _proc(role: str, name: str, cpu: float, rss: float) -> dict[str, Any]:
    return {"role": role, "name": name, "pid": 1000 + len(name),
            "cpuPercent": {"mean": cpu, "max": cpu * 1.1},
            "rssBytes": {"mean": rss, "max": rss * 1.05},
            "samples": [[0.25, cpu, rss], [0.5, cpu, rss]]}


def _adaptive_series(law: str, run: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """20 s calm, 60 s flood; u rises per law, the summary is computed from the series."""
    calm, overload, dt = 20.0, 60.0, 0.25
    peak = {"none": 2.79, "pid": 1.49, "lead": 0.96}[law] * (1 + (run - 2) * 0.01)
    t, u, m, adm, backlog, modes = [], [], [], [], [], []
    emergency = False
    for i in range(1, int((calm + overload) / dt) + 1):
        ti = i * dt
        if ti <= calm:
            ui, mi, ai = 0.41, 1.0, 31.0
        else:
            x = min((ti - calm) / 30.0, 1.0)
            if law == "none":
                ui, mi, ai = 0.41 + (peak - 0.41) * x, 1.0, 120.0
            elif law == "pid":
                ui = 0.41 + (peak - 0.41) * x if x < 1 else peak - 0.2 * ((ti - calm - 30) / 30)
                mi, ai = 1.0 - 0.38 * x, 83.0
            else:
                ui, mi, ai = 0.41 + (peak - 0.41) * x, 1.0 - 0.45 * x, 74.0
        emergency = emergency or ui > 1.4
        t.append(ti), u.append(round(ui, 4)), m.append(round(mi, 4)), adm.append(ai)
        backlog.append(max(0, int((ui - 0.41) * 1e8))), modes.append("emergency" if emergency else "normal")
    entries = sum(1 for a, b in zip(["normal", *modes], modes) if a == "normal" and b == "emergency")
    summary = {"calmSec": calm, "overloadSec": overload, "targetBytes": 123456789,
               "peakUOverTarget": max(u), "secondsAboveTarget": sum(dt for x in u if x > 1),
               "emergencyEntries": entries,
               "acceptedShareOfSustainable": {"none": 1.9, "pid": 1.32, "lead": 1.17}[law],
               "mPeakToPeak": {"none": 0.0, "pid": 0.38, "lead": 0.05}[law],
               "uPeakToPeak": {"none": 1.8, "pid": 0.19, "lead": 0.03}[law],
               "propagationP50Ms": None if law == "none" else 1.3,
               "propagationP99Ms": None if law == "none" else 8.9}
    return {"t": t, "u": u, "m": m, "admittedPerSec": adm, "backlogBytes": backlog,
            "mode": modes}, summary


def file_name(data: dict[str, Any]) -> str:
    c = data["config"]
    return (f"{c['implementation']}_{c['mode']}_{c['workload']}_{c['connections']}c_"
            f"{c['durationSec']:g}s_run{c['run']}.json")


def write_run(directory: Path, data: dict[str, Any], name: Optional[str] = None) -> Path:
    path = directory / (name or file_name(data))
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def write_results(directory: Path) -> Path:
    """The full synthetic session: 5 implementations x 2 modes (light), flood, heavy, nostr,
    adaptive none/pid/lead, a partly failed, an all-failed and a high-variance configuration,
    one unreadable run file and two .json files that are not run files (ignored)."""
    directory.mkdir(parents=True, exist_ok=True)
    for (impl, mode, workload), base in BASE.items():
        for run in (1, 2, 3):
            rps = base * JITTER[run]
            kw: dict[str, Any] = {}
            if (impl, mode, workload) == ("quotas-off", "cluster", "light"):
                rps = HIGH_VARIANCE_RUNS[run]
            if workload == "flood":
                kw["limited_share"] = 0.9
            if (impl, mode, workload, run) == FAILED_RUN:
                rps = 100.0  # would drag the median down if it were used
                kw.update(status="failed", reasons=["12 connection errors"])
            if (impl, mode, workload) == ALL_FAILED:
                kw.update(status="failed", reasons=["CLUSTERDOWN: the cluster is down"])
            data = make_run(impl, mode, workload, rps, run=run, **kw)
            if (impl, mode, workload, run) == FAILED_RUN:
                data["counts"]["errors"] = 12
            if (impl, mode, workload) == ALL_FAILED and run > 1:
                data["counts"], data["wallSeconds"], data["processes"] = None, None, []
            write_run(directory, data)
    for law in ADAPTIVE_LAWS:
        for run in (1, 2, 3):
            write_run(directory, make_run("ioredis", "standalone", f"adaptive-{law}", 60.0,
                                          run=run, connections=1, duration=80, wall=80.0))
    (directory / "iovalkey_standalone_heavy_50c_10s_run4.json").write_text(
        '{"schema": "sluice-bench-run/1", "status": "ok", "config": {', encoding="utf-8")
    # Other tools' output: not named like a run, so not the report's business.
    (directory / "gateway-bench.json").write_text('{"tool": "gateway-bench"}', encoding="utf-8")
    (directory / "notes.json").write_text("{not json", encoding="utf-8")
    write_pressure_files(directory)
    command = "./scripts/run-all.sh --clients all --workload all --runs 3 --duration 10"
    (directory / "session.json").write_text(json.dumps({
        "schema": "sluice-bench-session/1", "command": command,
        "startedAt": "2026-11-22T10:00:00.000Z", "machine": {"cpus": 2}, "versions": {},
        "settings": {"warm-up": "3s"}}), encoding="utf-8")
    (directory / "README.md").write_text(
        f"# sluice benchmark run 20261122_100000\n\nCommand: `{command}`\n", encoding="utf-8")
    (directory / "benchmark.log").write_text(
        "10:00:00 starting valkey standalone\n"
        "10:05:00 iovalkey cluster light run 2 FAILED: 12 connection errors\n"
        "10:20:00 done\n", encoding="utf-8")
    return directory


def _ramp(n: int, dt: float, f) -> tuple[list[float], list[float]]:
    t = [round(i * dt, 3) for i in range(n)]
    return t, [round(f(x), 4) for x in t]


def write_pressure_files(directory: Path, series: bool = True) -> list[Path]:
    """The closed-loop benchmarks' own files (docs/RESULTS-FORMAT.md), as the benches write
    them: bench fleet (under fleet/, one routing mode), bench spike (one arm with its series,
    one from before series were recorded), bench oom (one arm, a kill) and bench step (one
    law and disturbance). With `series=False`, every run has its series left out."""
    files = []

    def write(rel: str, data: dict[str, Any]) -> None:
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data), encoding="utf-8")
        files.append(path)

    t, u = _ramp(120, 0.5, lambda x: 0.5 if x < 20 else min(0.95, 0.5 + 0.03 * (x - 20)))
    write("fleet/fleet-bench.json", {
        "kind": "fleet-bench", "date": "2026-11-22T10:30:00.000Z",
        "options": {"degradeAtSec": 20, "degradeFactor": 0.25},
        "results": [{"mode": "headroom", "targets": [1, 1, 1], "samples": [
            {"t": x, "u": [0.5, 0.52, y], "backlogBytes": [0, 0, 0],
             "m": [1, 1, 1 if y < 0.7 else 0.4], "acceptedPerSec": 100}
            for x, y in zip(t, u)] if series else []}]})
    ts, us = _ramp(300, 0.1, lambda x: 0.75 if x < 10 else 0.95 if x < 16 else 0.76)
    spike_series = {"t": ts, "u": us, "m": [1 if y < 0.8 else 0.5 for y in us],
                    "m2": [1 if y < 0.8 else 0.5 for y in us]}
    write("spike-bench.json", {
        "kind": "spike-bench", "date": "2026-11-22T10:35:00.000Z", "options": {},
        "results": [
            {"variant": "spike", "pace": "fast", "trials": [],
             **({"series": spike_series, "marks": [{"t": 10, "text": "spike 1"}]}
                if series else {})},
            # A file's run written before the bench recorded series: nothing to draw.
            {"variant": "burst", "pace": "slow", "trials": []}]})
    to, uo = _ramp(200, 0.2, lambda x: 0.4 if x < 10 else min(1.2, 0.4 + 0.05 * (x - 10)))
    target = 200 * MIB
    write("oom-reference.json", {
        "kind": "oom-bench", "date": "2026-11-22T10:40:00.000Z",
        "options": {"relayImpl": "reference"},
        "arms": [{"variant": "none", "flood": "spam",
                  "frame": {"targetBytes": target, "limitBytes": 1.5 * target, "calmSec": 10,
                            "floodSec": 30},
                  "deaths": [{"t": 35.2}],
                  "samples": [{"t": x, "workingSetBytes": y * target, "multiplier": 1}
                              for x, y in zip(to, uo)] if series else []}]})
    tt, ut = _ramp(200, 0.25, lambda x: 0.6 if x < 10 else 0.9 - 0.3 * 2.718 ** (-(x - 10) / 4))
    write("step-bench.json", {
        "kind": "step-bench", "date": "2026-11-22T10:45:00.000Z", "options": {},
        "results": [{"law": "lead", "disturbance": "step",
                     **({"series": {"t": tt, "u": ut, "m": [1 if y < 0.7 else 0.3 for y in ut]},
                         "marks": [{"t": 10, "text": "flood 3 x sustainable"}]}
                        if series else {})}]})
    return files


# A session with quota leases: req/s of each +lease client by (its plain client, mode,
# workload). Beside each, at BASE's figures: the plain client, and quotas-off and the peer
# where BASE has them for that mode and workload (light, both topologies).
LEASED_RPS = {("iovalkey", "standalone", "light"): 4408,
              ("valkey-glide", "standalone", "light"): 4176,
              ("iovalkey", "cluster", "light"): 4140, ("iovalkey", "standalone", "flood"): 5900}
_LEASE_SCENARIOS = {(mode, workload) for _, mode, workload in LEASED_RPS}
LEASE_BASE = {
    **{k: v for k, v in BASE.items() if k in LEASED_RPS or (
        k[0] in ("quotas-off", "fastify-rate-limit") and k[1:] in _LEASE_SCENARIOS)},
    **{(f"{impl}+lease", mode, workload): v for (impl, mode, workload), v in LEASED_RPS.items()},
}


def write_lease_results(directory: Path,
                        over_admitted: Optional[dict[tuple[str, str, str, int], int]] = None
                        ) -> Path:
    """LEASE_BASE, three runs each; over_admitted: (implementation, mode, workload, run) ->
    writes that run admitted beyond the points Valkey granted."""
    directory.mkdir(parents=True, exist_ok=True)
    for (impl, mode, workload), base in LEASE_BASE.items():
        for run, jitter in JITTER.items():
            write_run(directory, make_run(
                impl, mode, workload, base * jitter, run=run,
                limited_share=0.9 if workload == "flood" else 0.0,
                over_admitted=(over_admitted or {}).get((impl, mode, workload, run), 0)))
    return directory


@pytest.fixture(scope="session")
def lease_report(tmp_path_factory: pytest.TempPathFactory):
    """The lease session, analysed and written once: (report, html path, csv path)."""
    from sluice_report import generate

    return generate(write_lease_results(tmp_path_factory.mktemp("leases") / "20261125_150000"))


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    return write_results(tmp_path / "20261122_100000")


@pytest.fixture(scope="session")
def built_report(tmp_path_factory: pytest.TempPathFactory):
    """The fixture session, analysed and written once: (report, html path, csv path)."""
    from sluice_report import generate

    directory = write_results(tmp_path_factory.mktemp("session") / "20261122_100000")
    return generate(directory)
