"""Memory / target and the multiplier over time, from the closed-loop benchmarks' own files.

`sluice bench oom` (oom-<relay>*.json), `bench spike` (spike-bench.json), `bench fleet`
(fleet-bench.json, also under fleet/) and `bench step` (step-bench.json) write one JSON file
each, beside or below the run files; each holds several runs (an arm, a routing mode, a law
and disturbance). This module reads them into one shape: per run, per node, u = memory /
target and m = the multiplier a gateway applied, over seconds, with marks on the time axis
(the flood, the cut, a kill). A run whose file holds no series (written before the benches
recorded them) is kept, with the reason, so the report says why it draws nothing for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .load import RUN_FILE_RE

KINDS = ("oom-bench", "spike-bench", "fleet-bench", "step-bench")
FLEET_NODES = ("relay-a", "relay-b", "relay-c")
FLEET_SICK = 2
MAX_FILE_BYTES = 64_000_000


@dataclass
class NodeSeries:
    name: str
    t: list[float]
    u: list[Optional[float]]
    m: list[Optional[float]]


@dataclass
class PressureRun:
    bench: str
    title: str
    file: str
    nodes: list[NodeSeries] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)
    note: str = ""
    # Why there is nothing to draw (None when there is).
    why_none: Optional[str] = None

    @property
    def drawable(self) -> bool:
        return self.why_none is None and any(n.t for n in self.nodes)


def _num(x: Any) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _nums(xs: Any) -> list[Optional[float]]:
    return [_num(x) for x in xs] if isinstance(xs, list) else []


NO_SERIES = "no time series in this file (written before the benchmark recorded them)"


def _oom(data: dict[str, Any], file: str) -> list[PressureRun]:
    relay = (data.get("options") or {}).get("relayImpl", "reference")
    out = []
    for arm in data.get("arms") or []:
        title = f"OOM, {relay} relay: {arm.get('flood')} flood, {arm.get('variant')}"
        run = PressureRun("oom", title, file)
        frame = arm.get("frame") or {}
        target = _num(frame.get("targetBytes"))
        samples = arm.get("samples")
        if not samples or not target:
            run.why_none = NO_SERIES
            out.append(run)
            continue
        run.nodes.append(NodeSeries(
            "relay", [float(s.get("t", 0)) for s in samples],
            [(_num(s.get("workingSetBytes")) or 0) / target for s in samples],
            [_num(s.get("multiplier")) for s in samples]))
        calm = _num(frame.get("calmSec"))
        if calm:
            run.marks.append((calm, "flood"))
        for d in arm.get("deaths") or []:
            if _num(d.get("t")) is not None:
                run.marks.append((float(d["t"]), "OOM kill"))
        limit = _num(frame.get("limitBytes"))
        run.note = (f"memory is the cgroup's working set; the hard limit is at "
                    f"{limit / target:.2f} x target" if limit else "")
        out.append(run)
    return out


def _fleet(data: dict[str, Any], file: str) -> list[PressureRun]:
    opts = data.get("options") or {}
    out = []
    for r in data.get("results") or []:
        degrade = r.get("degradeFactor", opts.get("degradeFactor", "?"))
        headroom = _num(r.get("headroomBytes"))
        where = (f"{headroom / 2**20:.0f} MiB of headroom, sick node drained to {degrade}, "
                 if headroom else "")
        run = PressureRun("fleet", f"Fleet: {where}routing {r.get('mode')}", file)
        samples = r.get("samples")
        if not samples:
            run.why_none = NO_SERIES
            out.append(run)
            continue
        t = [float(s.get("t", 0)) for s in samples]
        width = max(len(s.get("u") or []) for s in samples)
        for i in range(width):
            name = FLEET_NODES[i] if i < len(FLEET_NODES) else f"node {i + 1}"
            if i == FLEET_SICK:
                name += " (degraded)"
            run.nodes.append(NodeSeries(
                name, t, [_num((s.get("u") or [None] * width)[i]) for s in samples],
                [_num((s.get("m") or [None] * width)[i]) for s in samples]))
        at = _num(opts.get("degradeAtSec"))
        if at is not None:
            run.marks.append((at, f"{FLEET_NODES[FLEET_SICK]}'s drain cut to {degrade}"))
        out.append(run)
    return out


def _one_node(kind: str, title: Callable[[dict[str, Any]], str]):
    """A reader for a bench whose results each hold one relay's series and its marks."""
    def read(data: dict[str, Any], file: str) -> list[PressureRun]:
        out = []
        for r in data.get("results") or []:
            run = PressureRun(kind, title(r), file)
            s = r.get("series")
            if not isinstance(s, dict) or not s.get("t"):
                run.why_none = NO_SERIES
                out.append(run)
                continue
            run.nodes.append(
                NodeSeries("relay-a", _nums(s["t"]), _nums(s.get("u")), _nums(s.get("m"))))
            run.marks = [(float(k["t"]), str(k.get("text", ""))) for k in r.get("marks") or []]
            out.append(run)
        return out
    return read


_spike = _one_node("spike", lambda r: f"Spike: {r.get('variant')}, feed tick {r.get('pace')}")
_step = _one_node("step", lambda r: f"Step response: {r.get('law')}, {r.get('disturbance')}")


READERS: dict[str, Callable[[dict[str, Any], str], list[PressureRun]]] = {
    "oom-bench": _oom, "spike-bench": _spike, "fleet-bench": _fleet, "step-bench": _step,
}


def candidate_files(results_dir: Path) -> list[Path]:
    """JSON files in the directory and one level below (run-all.sh writes fleet/)."""
    files = sorted(results_dir.glob("*.json")) + sorted(results_dir.glob("*/*.json"))
    return [p for p in files if p.is_file() and not RUN_FILE_RE.search(p.name)]


def read_kind(path: Path) -> Optional[dict[str, Any]]:
    """The file's JSON when it is one of the closed-loop benchmarks' files, else None."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kind") in KINDS else None


def load_pressure_runs(results_dir: Path) -> list[PressureRun]:
    runs: list[PressureRun] = []
    for path in candidate_files(results_dir):
        data = read_kind(path)
        if data is None:
            continue
        rel = str(path.relative_to(results_dir))
        try:
            runs.extend(READERS[data["kind"]](data, rel))
        except (TypeError, KeyError, ValueError, AttributeError) as e:
            runs.append(PressureRun(data["kind"].removesuffix("-bench"), rel, rel,
                                    why_none=f"unreadable: {type(e).__name__}: {e}"))
    return runs


def has_pressure_files(results_dir: Path) -> bool:
    return any(read_kind(p) is not None for p in candidate_files(results_dir))
