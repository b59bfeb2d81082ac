"""Reading a results directory: run files, session.json and benchmark.log.

The harness is the only producer of run files and docs/run-file.schema.json (generated from
its zod schema) is their contract: a file that breaks it becomes an Unreadable entry naming
the field, and never stops the report. Rates, shares and per-request figures are taken as
the file states them; the report aggregates and renders, and never recomputes them.

Only files named like a run (`*_run<N>.json`) are run files; other .json files in the
directory (another tool's output) are not the report's business and are passed over.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from .names import VARIANTS, is_leased

SCHEMA = "sluice-bench-run/1"
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "run-file.schema.json"
REFERENCE_RELAY = "reference"
# The relay part is there only when the relay is not the reference one (nostr-rs-relay).
FILENAME_RE = re.compile(
    r"^(?P<implementation>[A-Za-z0-9.+-]+)_(?P<mode>[A-Za-z0-9-]+)_(?P<workload>[A-Za-z0-9-]+)"
    r"(?:_(?P<relay>[A-Za-z0-9.-]+))?"
    r"_(?P<connections>\d+)c_(?P<duration>\d+)s_run(?P<run>\d+)\.json$"
)
RUN_FILE_RE = re.compile(r"_run\d+\.json$")
LATENCY_FIELDS = ("p50", "p90", "p99", "max", "mean")
# What an ok run must state for the aggregates; a failed run is only listed.
OK_RUN_NEEDS = ("wallSeconds", "counts", "rates")
_TOP_FIELDS = frozenset({"status", "failure_reasons", "client_settings", "started_at",
                         "finished_at", "machine", "versions", "counts", "timeseries",
                         "adaptive"})
_CONFIG_FIELDS = frozenset({"client", "mode", "transport", "connections", "run"})
_validator: Optional[Draft202012Validator] = None


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
    cpu_ms_per_request: Optional[float]


@dataclass
class Run:
    file: str
    data: dict[str, Any]
    implementation: str
    workload: str
    processes: list[Process]
    warnings: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        """The file's own fields by the report's names: failure_reasons is failureReasons."""
        camel = re.sub(r"_(\w)", lambda m: m[1].upper(), name)
        if name in _TOP_FIELDS:
            return self.data[camel]
        if name in _CONFIG_FIELDS:
            return self.data["config"][camel]
        raise AttributeError(name)

    config = property(lambda self: self.data["config"])
    duration_s = property(lambda self: float(self.config["durationSec"]))
    runs_expected = property(lambda self: self.config["runs"])
    relay_impl = property(lambda self: self.config.get("relayImpl") or REFERENCE_RELAY)
    wall_s = property(lambda self: self.data["wallSeconds"])
    valkey_commands = property(lambda self: (self.data["valkey"] or {}).get("commands", {}))
    # +lease runs: the gateway's lease accounting (leased, spent, ..., overAdmitted, unspent).
    leases = property(lambda self: self.data.get("leases"))
    # Gateway processes that served the load (None: no sluice gateway, or an older file).
    gateway_workers = property(lambda self: self.data.get("gatewayWorkers"))
    # Single box: the cores relay, gateway and Valkey were pinned to (None: not pinned).
    cpus = property(lambda self: self.config.get("cpus"))
    load_cpus = property(lambda self: self.config.get("loadCpus"))
    # nostr-at-limit runs: events stored against the authors' and the sender's limits.
    past_limit = property(lambda self: self.data.get("pastLimit"))

    @property
    def latency(self) -> dict[str, Optional[float]]:
        stated = self.data["latencyMs"] or {}
        return {f: stated.get(f) for f in LATENCY_FIELDS}

    @property
    def key(self) -> tuple[str, str, str, int, float, str]:
        return (self.implementation, self.mode, self.workload, self.connections, self.duration_s,
                self.relay_impl)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def rate(self, name: str) -> Optional[float]:
        """A rate or share of `rates` (requestsPerSec, limitedShare, ...) as the file states it."""
        return (self.data["rates"] or {}).get(name)

    def valkey_per_request(self, name: str) -> Optional[float]:
        """valkey.perRequest (commands executed, inside scripts too) or scriptCallsPerRequest."""
        return (self.data["valkey"] or {}).get(name)

    def role_sum(self, role: str, metric: str) -> Optional[float]:
        values = [getattr(p, metric) for p in self.processes if p.role == role]
        values = [v for v in values if v is not None]
        return sum(values) if values else None


@dataclass
class ResultsDir:
    path: Path
    runs: list[Run]
    unreadable: list[Unreadable]
    readme: Optional[str]
    log: Optional[str]
    # session.json: the command, machine, versions and settings the harness recorded.
    session: Optional[dict[str, Any]] = None


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


def scenario(cfg: dict[str, Any]) -> tuple[str, str]:
    """The (implementation, workload) a run belongs to, its variants told apart by name."""
    implementation, workload = cfg["implementation"], cfg["workload"]
    # A gateway of several worker processes is a configuration of its own ("iovalkey-2w"), and
    # so is `workers: auto` (one per core it may use: "iovalkey-auto"; gatewayWorkers says how
    # many ran).
    workers = cfg.get("workers") or 1
    if workers == "auto":
        implementation = f"{implementation}-auto"
    elif workers > 1:
        implementation = f"{implementation}-{workers}w"
    # Nostr charging the sender only, or authors on the relay's OK, compared with relay alone.
    workload = VARIANTS.get((workload, cfg.get("nostrIdentity")), workload)
    # An open-loop (arrival-rate) run is its own scenario: "light-rate3000".
    if cfg.get("rate"):
        workload = f"{workload}-rate{cfg['rate']:.10g}"
    return implementation, workload


def parse_run(data: Any, file: str) -> Run:
    """Check one decoded run file against the contract; raise Invalid with the reason."""
    if not isinstance(data, dict):
        raise Invalid("not a JSON object")
    if data.get("schema") != SCHEMA:
        raise Invalid(f"unknown schema {data.get('schema')!r} (expected {SCHEMA!r})")
    check_contract(data)
    ok = data["status"] == "ok"
    for name in OK_RUN_NEEDS if ok else ():
        if data[name] is None:
            raise Invalid(f"missing field {name} (an ok run states it)")
    processes = [Process(p["role"], p["name"], p["cpuPercent"]["mean"], p["rssBytes"]["mean"],
                         p["cpuMsPerRequest"]) for p in data["processes"]]
    run = Run(file, data, *scenario(data["config"]), processes)
    _warn(run)
    return run


def _warn(run: Run) -> None:
    """What one file says against itself: reported beside the figures, never fatal."""
    m = FILENAME_RE.match(run.file)
    if m:
        named = (m["implementation"], m["mode"], m["workload"], int(m["connections"]),
                 float(m["duration"]), int(m["run"]), m["relay"] or REFERENCE_RELAY)
        inside = (run.implementation, run.mode, run.workload, run.connections, run.duration_s,
                  run.run, run.relay_impl)
        if named != inside:
            run.warnings.append(f"file name says {named}, config says {inside}; the config "
                                f"is used")
    if not run.ok and not run.failure_reasons:
        run.warnings.append("failed with no failureReasons given")
    if run.ok and is_leased(run.implementation) and run.leases is None:
        run.warnings.append("a +lease run without its lease accounting (leases): its "
                            "over-admission is not known")
    if run.ok and abs(run.wall_s - run.duration_s) > 0.1 * run.duration_s:
        run.warnings.append(f"measured window {run.wall_s:.2f} s differs from the "
                            f"{run.duration_s:g} s asked for by more than 10%")
    ts = run.timeseries or {}
    for k in [k for k, v in ts.items() if len(v) != len(ts.get("t", ()))]:
        run.warnings.append(f"timeseries.{k} has {len(ts.pop(k))} points for "
                            f"{len(ts.get('t', ()))} times: not plotted")


def load_file(path: Path) -> Run | Unreadable:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        return Unreadable(path.name, f"cannot read: {e}")
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


def _read_session(path: Path) -> Optional[dict[str, Any]]:
    """The session record `sluice bench session` wrote; None when there is none to read."""
    text = _read_optional(path)
    try:
        data = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    ok = isinstance(data, dict) and data.get("schema") == "sluice-bench-session/1"
    return data if ok else None


def load_dir(path: Path) -> ResultsDir:
    runs: list[Run] = []
    unreadable: list[Unreadable] = []
    for p in run_files(path):
        r = load_file(p)
        (runs if isinstance(r, Run) else unreadable).append(r)
    seen: dict[tuple[Any, ...], str] = {}
    for r in runs:
        first = seen.setdefault((*r.key, r.run), r.file)
        if first != r.file:
            r.warnings.append(f"same configuration and run index as {first}")
    return ResultsDir(path=path, runs=runs, unreadable=unreadable,
                      readme=_read_optional(path / "README.md"),
                      log=_read_optional(path / "benchmark.log"),
                      session=_read_session(path / "session.json"))
