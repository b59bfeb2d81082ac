"""Reading a results directory: run files (validated), README.md and benchmark.log.

A file that does not parse, has an unknown schema or lacks a field the report needs becomes
an Unreadable entry with the reason; it never stops the report. Rates are recomputed here
from counts over the measured wall time: the file's own `rates` are only cross-checked
(the public benchmark this replaces printed bytes/s as req/s). Valkey calls leave out
replication (REPLCONF, PSYNC, SYNC), which the load does not cause: the harness leaves them
out itself.

Only files named like a run (`*_run<N>.json`) are run files; other .json files in the
directory (another tool's output) are not the report's business and are passed over.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from .names import RELAY_VERIFIED, SENDER_ONLY

SCHEMA = "sluice-bench-run/1"
# The run file's contract, generated from the harness's own schema (sluice bench schema).
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "run-file.schema.json"
_validator: Optional[Draft202012Validator] = None


def check_contract(data: Any) -> None:
    """Raise Invalid naming the first place where `data` breaks the run file's schema."""
    global _validator
    if _validator is None:
        _validator = Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    error = best_match(_validator.iter_errors(data))
    if error is None:
        return
    path = ".".join(str(p) for p in error.absolute_path)
    prefix = f"{path}." if path else ""
    names = re.findall(r"'([^']+)'", error.message)
    if error.validator == "required" and names:
        raise Invalid(f"missing field {prefix}{names[0]}")
    if error.validator == "additionalProperties" and names:
        raise Invalid(f"unknown field {prefix}{names[0]} (not in the run file's schema)")
    raise Invalid(f"field {path or '(the file)'}: {error.message}")
# The relay part is there only when the relay is not the reference one (nostr-rs-relay).
FILENAME_RE = re.compile(
    r"^(?P<implementation>[A-Za-z0-9.-]+)_(?P<mode>[A-Za-z0-9-]+)_(?P<workload>[A-Za-z0-9-]+)"
    r"(?:_(?P<relay>[A-Za-z0-9.-]+))?"
    r"_(?P<connections>\d+)c_(?P<duration>\d+)s_run(?P<run>\d+)\.json$"
)
REFERENCE_RELAY = "reference"
# What makes a file a run file: its name. Anything else is ignored, even if it is JSON.
RUN_FILE_RE = re.compile(r"_run\d+\.json$")
COUNT_FIELDS = ("requests", "ok2xx", "limited429", "otherNon2xx", "errors", "timeouts")
LATENCY_FIELDS = ("p50", "p90", "p99", "max", "mean")
# The file's rates may differ from ours by rounding only.
RATE_TOLERANCE = 0.01
# The commands that run a script: one round trip carries the whole quota check.
SCRIPT_COMMANDS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})


class Invalid(Exception):
    """A run file that cannot be used; the message says why."""


@dataclass(frozen=True)
class Unreadable:
    file: str
    reason: str


@dataclass
class Process:
    role: str
    name: str
    cpu_mean: Optional[float]
    rss_mean: Optional[float]
    # CPU time over the measured window / its responses, as the run file states it.
    cpu_ms_per_request: Optional[float] = None


@dataclass
class Run:
    file: str
    status: str
    failure_reasons: list[str]
    implementation: str
    client: Optional[str]
    mode: str
    workload: str
    transport: Optional[str]
    connections: int
    duration_s: float
    run: int
    runs_expected: Optional[int]
    config: dict[str, Any]
    client_settings: Optional[dict[str, Any]]
    started_at: Optional[str]
    finished_at: Optional[str]
    machine: dict[str, Any]
    versions: dict[str, Any]
    wall_s: Optional[float]
    counts: Optional[dict[str, float]]
    latency: dict[str, Optional[float]]
    processes: list[Process]
    valkey_calls: Optional[float]
    valkey_commands: dict[str, float]
    valkey_script_calls: Optional[float]
    timeseries: Optional[dict[str, list[Any]]]
    adaptive: Optional[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    # The relay measured: "reference" (ours; also every file from before it could be chosen)
    # or a third-party one such as "nostr-rs-relay".
    relay_impl: str = REFERENCE_RELAY

    @property
    def key(self) -> tuple[str, str, str, int, float, str]:
        return (self.implementation, self.mode, self.workload, self.connections, self.duration_s,
                self.relay_impl)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def per_s(self, count: str) -> Optional[float]:
        """A count over the measured wall time: the only source of every rate."""
        if self.counts is None or not self.wall_s:
            return None
        value = self.counts.get(count)
        return None if value is None else value / self.wall_s

    def share(self, count: str) -> Optional[float]:
        if self.counts is None or not self.counts.get("requests"):
            return None
        value = self.counts.get(count)
        return None if value is None else value / self.counts["requests"]

    def role_sum(self, role: str, metric: str) -> Optional[float]:
        values = [getattr(p, metric) for p in self.processes if p.role == role]
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    def _per_request(self, value: Optional[float]) -> Optional[float]:
        if value is None or self.counts is None or not self.counts.get("requests"):
            return None
        return value / self.counts["requests"]

    def cmds_per_request(self) -> Optional[float]:
        """Commands Valkey executed per response, those a script runs inside it included."""
        return self._per_request(self.valkey_calls)

    def round_trips_per_request(self) -> Optional[float]:
        """Script calls (EVAL/EVALSHA/FCALL) per response: the round trips carrying the quota.

        None for files from before the harness recorded valkey.scriptCalls (not guessed).
        """
        return self._per_request(self.valkey_script_calls)


@dataclass
class ResultsDir:
    path: Path
    runs: list[Run]
    unreadable: list[Unreadable]
    readme: Optional[str]
    log: Optional[str]
    # session.json: the command, machine, versions and settings the harness recorded.
    session: Optional[dict[str, Any]] = None


# --- field access with reasons -------------------------------------------------------------


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _get(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise Invalid(f"missing field {path}")
        cur = cur[part]
    return cur


def _str(obj: Any, path: str) -> str:
    v = _get(obj, path)
    if not isinstance(v, str) or not v:
        raise Invalid(f"field {path} must be a non-empty string, got {v!r}")
    return v


def _num(obj: Any, path: str, *, positive: bool = False) -> float:
    v = _get(obj, path)
    if not _is_num(v) or v < 0 or (positive and v == 0):
        want = "a positive number" if positive else "a non-negative number"
        raise Invalid(f"field {path} must be {want}, got {v!r}")
    return float(v)


def _opt_num(obj: Any, path: str) -> Optional[float]:
    try:
        v = _get(obj, path)
    except Invalid:
        return None
    return float(v) if _is_num(v) else None


def _int(obj: Any, path: str) -> int:
    v = _get(obj, path)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise Invalid(f"field {path} must be a non-negative integer, got {v!r}")
    return v


def _opt(obj: Any, key: str, kind: type) -> Any:
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if isinstance(v, kind) else None


# --- one run ------------------------------------------------------------------------------


def parse_run(data: Any, file: str) -> Run:
    """Validate one decoded run file; raise Invalid with the reason."""
    if not isinstance(data, dict):
        raise Invalid("not a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise Invalid(f"unknown schema {schema!r} (expected {SCHEMA!r})")
    check_contract(data)
    status = _str(data, "status")
    if status not in ("ok", "failed"):
        raise Invalid(f"status must be 'ok' or 'failed', got {status!r}")
    reasons = data.get("failureReasons", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise Invalid("failureReasons must be a list of strings")

    cfg = _get(data, "config")
    if not isinstance(cfg, dict):
        raise Invalid("config must be an object")
    implementation = _str(data, "config.implementation")
    # A gateway of several worker processes is a configuration of its own ("iovalkey-2w").
    workers = cfg.get("workers")
    if isinstance(workers, int) and workers > 1:
        implementation = f"{implementation}-{workers}w"
    mode = _str(data, "config.mode")
    workload = _str(data, "config.workload")
    # Nostr runs that charge the sender only (no signature verification) are a scenario of
    # their own, compared with the same relay alone.
    if workload == "nostr" and cfg.get("nostrIdentity") == "ip":
        workload = SENDER_ONLY
    # Authors charged on the relay's OK (nostr.verify relay): no verification at the gateway.
    if workload == "nostr" and cfg.get("nostrIdentity") == "relay-verified":
        workload = RELAY_VERIFIED
    # An open-loop (arrival-rate) run is its own scenario: "light-rate3000".
    rate = cfg.get("rate")
    if isinstance(rate, int) and rate > 0:
        workload = f"{workload}-rate{rate}"
    connections = _int(data, "config.connections")
    duration = _num(data, "config.durationSec", positive=True)
    run_index = _int(data, "config.run")
    warnings: list[str] = []

    ok = status == "ok"
    wall: Optional[float] = None
    counts: Optional[dict[str, float]] = None
    if ok:
        # An ok run feeds the aggregates: everything they use must be there.
        wall = _num(data, "wallSeconds", positive=True)
        counts = {f: _num(data, f"counts.{f}") for f in COUNT_FIELDS}
        if not isinstance(data.get("processes"), list):
            raise Invalid("missing field processes (a list)")
    else:
        # A failed run is only listed; take what is there.
        wall = _opt_num(data, "wallSeconds") or None
        if isinstance(data.get("counts"), dict):
            counts = {f: v for f in COUNT_FIELDS if (v := _opt_num(data, f"counts.{f}")) is not None}
            if "requests" not in counts:
                counts = None
        if not reasons:
            warnings.append("failed with no failureReasons given")

    latency: dict[str, Optional[float]] = {f: _opt_num(data, f"latencyMs.{f}") for f in LATENCY_FIELDS}

    processes: list[Process] = []
    for i, p in enumerate(data.get("processes") or []):
        if not isinstance(p, dict) or not isinstance(p.get("role"), str):
            raise Invalid(f"processes[{i}] has no role")
        processes.append(
            Process(
                role=p["role"],
                name=str(p.get("name") or p["role"]),
                cpu_mean=_opt_num(p, "cpuPercent.mean"),
                rss_mean=_opt_num(p, "rssBytes.mean"),
                cpu_ms_per_request=_opt_num(p, "cpuMsPerRequest"),
            )
        )

    valkey = data.get("valkey") if isinstance(data.get("valkey"), dict) else None
    calls = _opt_num(valkey, "calls") if valkey else None
    script_calls = _opt_num(valkey, "scriptCalls") if valkey else None
    raw_commands = (valkey or {}).get("commands")
    raw = {str(k).lower(): float(v) for k, v in
           (raw_commands.items() if isinstance(raw_commands, dict) else ()) if _is_num(v)}
    # Replication between primaries and replicas is not the load's doing.
    commands = raw

    timeseries = data.get("timeseries") if isinstance(data.get("timeseries"), dict) else None
    adaptive = data.get("adaptive") if isinstance(data.get("adaptive"), dict) else None
    if timeseries is not None:
        timeseries = _check_timeseries(timeseries, warnings)

    run = Run(
        file=file,
        status=status,
        failure_reasons=list(reasons),
        implementation=implementation,
        client=_opt(cfg, "client", str),
        mode=mode,
        workload=workload,
        transport=_opt(cfg, "transport", str),
        connections=connections,
        duration_s=duration,
        run=run_index,
        runs_expected=_opt(cfg, "runs", int),
        config=cfg,
        client_settings=_opt(data, "clientSettings", dict),
        started_at=_opt(data, "startedAt", str),
        finished_at=_opt(data, "finishedAt", str),
        machine=_opt(data, "machine", dict) or {},
        versions=_opt(data, "versions", dict) or {},
        wall_s=wall,
        counts=counts,
        latency=latency,
        processes=processes,
        valkey_calls=calls,
        valkey_commands=commands,
        valkey_script_calls=script_calls,
        timeseries=timeseries,
        adaptive=adaptive,
        warnings=warnings,
        relay_impl=_opt(cfg, "relayImpl", str) or REFERENCE_RELAY,
    )
    _cross_check(run, data)
    return run


def _check_timeseries(ts: dict[str, Any], warnings: list[str]) -> Optional[dict[str, list[Any]]]:
    t = ts.get("t")
    if not isinstance(t, list) or not t:
        warnings.append("timeseries has no t: not plotted")
        return None
    out: dict[str, list[Any]] = {"t": t}
    for k in ("u", "m", "admittedPerSec", "backlogBytes", "mode"):
        v = ts.get(k)
        if isinstance(v, list) and len(v) == len(t):
            out[k] = v
        elif v is not None:
            warnings.append(f"timeseries.{k} has {len(v) if isinstance(v, list) else 'no'} "
                            f"points for {len(t)} times: not plotted")
    return out


def _cross_check(run: Run, data: dict[str, Any]) -> None:
    """Disagreements inside one file: reported, and the counts win."""
    w = run.warnings
    m = FILENAME_RE.match(run.file)
    if m:
        named = (m["implementation"], m["mode"], m["workload"], int(m["connections"]),
                 float(m["duration"]), int(m["run"]), m["relay"] or REFERENCE_RELAY)
        inside = (run.implementation, run.mode, run.workload, run.connections, run.duration_s,
                  run.run, run.relay_impl)
        if named != inside:
            w.append(f"file name says {named}, config says {inside}; the config is used")
    if not run.ok or run.counts is None or not run.wall_s:
        return
    c = run.counts
    answered = c["ok2xx"] + c["limited429"] + c["otherNon2xx"]
    if answered != c["requests"]:
        w.append(f"counts.requests {c['requests']:.0f} != 2xx + 429 + other non-2xx "
                 f"{answered:.0f}")
    ours = c["requests"] / run.wall_s
    theirs = _opt_num(data, "rates.requestsPerSec")
    if theirs is not None and abs(theirs - ours) > RATE_TOLERANCE * max(ours, 1.0):
        w.append(f"rates.requestsPerSec {theirs:,.1f} disagrees with counts.requests / "
                 f"wallSeconds = {ours:,.1f} (x{theirs / ours if ours else float('inf'):.1f}); "
                 f"the report uses counts / wallSeconds")
    if abs(run.wall_s - run.duration_s) > 0.1 * run.duration_s:
        w.append(f"measured window {run.wall_s:.2f} s differs from the {run.duration_s:g} s "
                 f"asked for by more than 10%")
    for per_key, total_key in (("perRequest", "calls"), ("scriptCallsPerRequest", "scriptCalls")):
        per_req = _opt_num(data, f"valkey.{per_key}")
        total = _opt_num(data, f"valkey.{total_key}")
        if per_req is not None and total is not None and c["requests"]:
            theirs_cpr = total / c["requests"]
            if abs(per_req - theirs_cpr) > 0.01 * max(theirs_cpr, 0.01):
                w.append(f"valkey.{per_key} {per_req:.3f} disagrees with valkey.{total_key} / "
                         f"counts.requests = {theirs_cpr:.3f}; the latter is used")
    if run.valkey_script_calls is not None and run.valkey_commands:
        scripts = sum(v for k, v in run.valkey_commands.items() if k in SCRIPT_COMMANDS)
        if abs(scripts - run.valkey_script_calls) > 0.5 + 0.01 * scripts:
            w.append(f"valkey.scriptCalls {run.valkey_script_calls:,.0f} disagrees with the "
                     f"script commands in valkey.commands ({scripts:,.0f}); scriptCalls is used")
    if (run.valkey_script_calls is not None and run.valkey_calls is not None
            and run.valkey_script_calls > run.valkey_calls + 0.5):
        w.append(f"valkey.scriptCalls {run.valkey_script_calls:,.0f} exceeds valkey.calls "
                 f"{run.valkey_calls:,.0f}")


# --- a directory ------------------------------------------------------------------------------


def load_file(path: Path) -> Run | Unreadable:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return Unreadable(path.name, f"cannot read: {e}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return Unreadable(path.name, f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}")
    try:
        return parse_run(data, path.name)
    except Invalid as e:
        return Unreadable(path.name, str(e))


def is_run_file_name(name: str) -> bool:
    return RUN_FILE_RE.search(name) is not None


def run_files(path: Path) -> list[Path]:
    """The run files of a directory: `*_run<N>.json`. Other .json files are not runs."""
    return sorted(p for p in path.iterdir() if is_run_file_name(p.name) and p.is_file())


def other_json_files(path: Path) -> list[Path]:
    """.json files that are not run files: ignored, named only when nothing else is there."""
    return sorted(p for p in path.iterdir()
                  if p.suffix == ".json" and not is_run_file_name(p.name) and p.is_file())


def _read_optional(path: Path, limit: int = 2_000_000) -> Optional[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def load_dir(path: Path) -> ResultsDir:
    runs: list[Run] = []
    unreadable: list[Unreadable] = []
    for p in run_files(path):
        r = load_file(p)
        (runs if isinstance(r, Run) else unreadable).append(r)
    _check_duplicates(runs)
    return ResultsDir(
        path=path,
        runs=runs,
        unreadable=unreadable,
        readme=_read_optional(path / "README.md"),
        log=_read_optional(path / "benchmark.log"),
        session=_read_session(path / "session.json"),
    )


def _read_session(path: Path) -> Optional[dict[str, Any]]:
    """The session record `sluice bench session` wrote; None when there is none to read."""
    text = _read_optional(path)
    try:
        data = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    ok = isinstance(data, dict) and data.get("schema") == "sluice-bench-session/1"
    return data if ok else None


def _check_duplicates(runs: list[Run]) -> None:
    seen: dict[tuple[Any, ...], str] = {}
    for r in runs:
        k = (*r.key, r.run)
        if k in seen:
            r.warnings.append(f"same configuration and run index as {seen[k]}")
        else:
            seen[k] = r.file
