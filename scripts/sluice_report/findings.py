"""Key findings: sentences computed from this results directory, each with its numbers.

Nothing here is written in advance: a topic without data in the directory yields no
sentence, and an ordering that the runs' spread does not settle is said to be unsettled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import fmt
from .aggregate import Config
from .header import NOT_A_SETTING, SettingComparison
from .load import Run
from .names import (CEILING, LAW_LABELS, LAWS, PEER, impl_rank, is_adaptive, is_leased,
                    mode_rank, plain_of)
from .ratios import (Scenario, find, peer_vs_sluice, ranked_clients, scenario,
                     scenarios_in_order)
from .stats import HIGH_CV, median, maximum, minimum


@dataclass(frozen=True)
class Finding:
    topic: str
    text: str


TOPICS = (
    "Fastest client", "Cost of quotas", "Peer baseline", "Client settings", "Valkey round trips",
    "Quota leases", "Limits held", "Rejection path", "Adaptive scenario", "Variance", "Failed runs",
    "Data quality",
)


def _where(scen: Scenario) -> str:
    mode, workload, connections = scen
    return f"{mode.capitalize()}, {workload}, {connections} connections"


def _n(cfg: Config) -> str:
    return fmt.plural(len(cfg.ok), "run")


def _single(*cfgs: Config) -> str:
    """A tag for figures that rest on one run, so the sentence does not read as settled."""
    return "; single runs, no spread" if any(c.req.n < 2 for c in cfgs) else ""


def _overlap(a: Config, b: Config) -> Optional[bool]:
    if a.req.n < 2 or b.req.n < 2:
        return None
    return a.req.min <= b.req.max and b.req.min <= a.req.max


def fastest_client(configs: list[Config]) -> list[Finding]:
    out = []
    for scen in scenarios_in_order(configs):
        if is_adaptive(scen[1]):
            continue
        ranked = ranked_clients(configs, scen)
        if len(ranked) < 2:
            continue
        best, runner = ranked[0], ranked[1]
        ahead = [f"{(best.req.median / c.req.median - 1) * 100:.0f}% ahead of {c.implementation} "
                 f"({fmt.rate(c.req.median)})" for c in ranked[1:]]
        text = (f"{_where(scen)}: {best.implementation} is the fastest client at "
                f"{fmt.rate(best.req.median)} req/s (median of {_n(best)}), "
                f"{fmt.join_and(ahead)}.")
        overlap = _overlap(best, runner)
        if overlap:
            text += (f" Its run range ({fmt.rate(best.req.min)}–{fmt.rate(best.req.max)}) overlaps "
                     f"{runner.implementation}'s ({fmt.rate(runner.req.min)}–"
                     f"{fmt.rate(runner.req.max)}), so these runs do not settle that order.")
        elif overlap is None:
            text += " With a single ok run on one side, there is no spread to judge the gap by."
        out.append(Finding("Fastest client", text))
    return out


def quota_cost(configs: list[Config]) -> list[Finding]:
    out = []
    for scen in scenarios_in_order(configs):
        if is_adaptive(scen[1]):
            continue
        ceiling = find(configs, CEILING, scen)
        ranked = ranked_clients(configs, scen)
        if ceiling is None or not ranked:
            continue
        best, worst = ranked[0], ranked[-1]
        if best.ratio_vs_quotas_off > 1:
            # Faster than the ceiling: the ratio cannot be a cost; say so rather than "keeps 1.5".
            text = (f"{_where(scen)}: with quotas on, {best.implementation} answers "
                    f"{fmt.times(best.ratio_vs_quotas_off)} the quotas-off ceiling "
                    f"({fmt.rate(best.req.median)} against {fmt.rate(ceiling.req.median)} req/s"
                    f"{_single(best, ceiling)}), more than the ceiling itself: here the runs do "
                    f"not measure the quota check's cost")
        else:
            text = (f"{_where(scen)}: with quotas on, {best.implementation} keeps "
                    f"{fmt.ratio(best.ratio_vs_quotas_off)} of the quotas-off ceiling "
                    f"({fmt.rate(best.req.median)} of {fmt.rate(ceiling.req.median)} req/s"
                    f"{_single(best, ceiling)})")
        added = _p99_added(best, ceiling)
        if added is not None:
            text += f", p99 latency {added:+.1f} ms"
        if worst is not best:
            least = "keeps the least" if worst.ratio_vs_quotas_off <= 1 else "is the least above it"
            text += (f"; {worst.implementation} {least}, "
                     f"{fmt.ratio(worst.ratio_vs_quotas_off)} ({fmt.rate(worst.req.median)})")
        text += "."
        if ceiling.high_variance:
            text += (f" The ceiling's own runs vary by CV {fmt.pct(ceiling.req.cv)} "
                     f"({fmt.rate(ceiling.req.min)}–{fmt.rate(ceiling.req.max)}): read these "
                     f"ratios loosely.")
        out.append(Finding("Cost of quotas", text))
    return out


def _p99_added(cfg: Config, ceiling: Config) -> Optional[float]:
    a, b = cfg.latency.get("p99"), ceiling.latency.get("p99")
    if a is None or b is None or a.median is None or b.median is None:
        return None
    return a.median - b.median


def peer(configs: list[Config]) -> list[Finding]:
    by_scen: dict[Scenario, list] = {}
    for cmp in peer_vs_sluice(configs):
        by_scen.setdefault(cmp.scenario, []).append(cmp)
    out = []
    for scen, cmps in by_scen.items():
        parts = [f"{c.peer_over_client:.2f}× {c.client} ({fmt.rate(c.client_req)})" for c in cmps]
        tag = _single(*(x for x in configs if (x.mode, x.workload, x.connections) == scen
                        and x.implementation in (PEER, *(c.client for c in cmps))
                        and x.req.median is not None))
        verdict = ("slower than every sluice client" if all(c.peer_over_client < 1 for c in cmps)
                   else "faster than every sluice client" if all(c.peer_over_client > 1 for c in cmps)
                   else "between the sluice clients")
        out.append(Finding("Peer baseline", (
            f"{_where(scen)}: the peer, {PEER}, answers {fmt.rate(cmps[0].peer_req)} req/s, "
            f"{verdict}: {fmt.join_and(parts)}{tag}.")))
    return out


def _trips(c: Config) -> Optional[float]:
    return c.round_trips_per_request.median


def _executed(c: Config) -> Optional[float]:
    return c.cmds_per_request.median


def _spread_note(values: list[float], n_cfgs: int) -> str:
    lo, hi = minimum(values), maximum(values)
    if n_cfgs < 2:
        return "in its one configuration"
    if hi - lo < 0.005:
        return f"the same in all {n_cfgs} configurations"
    return f"{lo:.2f}–{hi:.2f} over {n_cfgs} configurations"


def valkey_round_trips(configs: list[Config]) -> list[Finding]:
    """Round trips (script calls) per response as the headline; executed commands as detail.

    Flood is told apart: there the in-memory block keeps over-limit clients away from Valkey,
    and mixing it into one median with the other workloads would describe neither.
    """
    out = []
    steady = [c for c in configs if not c.is_adaptive and c.workload != "flood"
              and (_trips(c) is not None or _executed(c) is not None)]
    parts = []
    for impl in sorted({c.implementation for c in steady}, key=impl_rank):
        cfgs = [c for c in steady if c.implementation == impl]
        with_trips = [c for c in cfgs if _trips(c) is not None]
        executed = [_executed(c) for c in cfgs if _executed(c) is not None]
        if impl == CEILING and all(v == 0 for v in [*executed, *map(_trips, with_trips)]):
            parts.append(f"{impl}: no round trips, no commands (no quota check).")
            continue
        if not with_trips:
            continue
        text = f"{impl}: {median([_trips(c) for c in with_trips]):.2f} round trips per response"
        if executed:
            text += f", {median(executed):.2f} commands executed"
            mix = _command_mix(cfgs)
            if mix:
                text += f" ({mix})"
        text += f"; round trips {_spread_note([_trips(c) for c in with_trips], len(with_trips))}"
        parts.append(text + ".")
    if parts:
        out.append(Finding("Valkey round trips", (
            "A round trip is one script call (EVAL, EVALSHA or FCALL) carrying a whole quota "
            "check (with +lease: a lease take, points for many writes); commands executed "
            "(INFO commandstats on every primary, replication left out) also count what the "
            "script runs inside Valkey, at no extra network cost. Per "
            "response, median over each implementation's configurations outside flood and the "
            "adaptive scenario:")))
        out += [Finding("Valkey round trips", t) for t in parts]
    flood = [c for c in configs if c.workload == "flood" and _trips(c) is not None
             and c.implementation != CEILING]
    if flood:
        flood.sort(key=lambda c: (mode_rank(c.mode), impl_rank(c.implementation)))
        shown = [f"{c.implementation} {c.mode} {_trips(c):.2f}"
                 + (f" ({_executed(c):.2f} executed)" if _executed(c) is not None else "")
                 for c in flood]
        text = f"Under flood, round trips per response: {fmt.join_and(shown)}."
        below = [c for c in flood if c.in_memory_block and _trips(c) < 0.995]
        if below:
            text += (" Below one with the in-memory block on: clients already known to be over "
                     "their limit are answered 429 from the gateway's memory, without asking "
                     "Valkey.")
        out.append(Finding("Valkey round trips", text))
    return out


def _command_mix(cfgs: list[Config]) -> str:
    """Per command, the median over configurations of its calls per response, largest first."""
    names = sorted({k for c in cfgs for k in c.commands_per_request})
    mix = [(k, median([c.commands_per_request.get(k, 0.0) for c in cfgs])) for k in names]
    mix = sorted(((k, v) for k, v in mix if v is not None and v >= 0.005), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.2f}" for k, v in mix)


def lease_accounting(configs: list[Config]) -> list[Finding]:
    """Over-admission is a fault wherever it shows (failed runs too); unspent points are the
    price leases pay in exactness."""
    leased = [c for c in configs if is_leased(c.implementation)]
    accounted = [(c, r) for c in leased for r in c.runs if r.leases is not None]
    if not accounted:
        return []
    over = [(c, r) for c, r in accounted if r.leases["overAdmitted"]]
    if over:
        parts = [f"{c.label} run {r.run}, {r.leases['overAdmitted']:,} of "
                 f"{r.leases['spent']:,} writes" + ("" if r.ok else " (a failed run)")
                 for c, r in over]
        return [Finding("Quota leases", (
            f"⚠ Over-admission: {fmt.plural(len(over), 'lease run')} admitted writes beyond the "
            f"points Valkey granted, which must never happen: {'; '.join(parts)}. There the "
            f"gateway let through more than the quota allows; "
            f"{'this run measures' if len(over) == 1 else 'these runs measure'} no valid "
            f"throughput until the lease accounting is mended."))]
    n_cfgs = len({c.key for c, _ in accounted})
    text = (f"No lease run admitted a write beyond the points Valkey granted (over-admitted 0 "
            f"in all {fmt.plural(len(accounted), 'run')} with lease accounting, "
            f"{fmt.plural(n_cfgs, 'configuration')}).")
    shares = [s for c in leased if (s := c.lease_unspent_share.median) is not None]
    if shares:
        lo, hi = fmt.pct(minimum(shares)), fmt.pct(maximum(shares))
        share = lo if lo == hi else f"{lo}–{hi}"
        text += (f" Points leased but never spent nor handed back (lapsed with their window or "
                 f"held at the end), the bound on under-admission: {share} of those leased "
                 f"(median per configuration).")
    return [Finding("Quota leases", text)]


def limits_held(runs: list[Run]) -> list[Finding]:
    """Runs whose authors sent past their quota (nostr-at-limit): anything stored past a limit
    is a fault, failed runs included; a run that brought no author to its limit shows nothing."""
    checked = [r for r in runs if r.past_limit]
    if not checked:
        return []
    over = [r for r in checked
            if r.past_limit["authorsOverAdmitted"] or r.past_limit["senderOverAdmitted"]]
    if over:
        parts = [f"{r.implementation}:{r.mode} run {r.run}: "
                 f"{r.past_limit['authorsOverAdmitted']:,} past an author's limit, "
                 f"{r.past_limit['senderOverAdmitted']:,} past the sender's" for r in over]
        return [Finding("Limits held", (
            f"⚠ Over-admission: {fmt.plural(len(over), 'run')} stored events past a limit, "
            f"which must never happen: {'; '.join(parts)}."))]
    at_limit = sum(r.past_limit["authorsAtLimit"] for r in checked)
    authors = sum(r.past_limit["authors"] for r in checked)
    limit = checked[0].past_limit["authorLimit"]
    return [Finding("Limits held", (
        f"No author or sender was admitted past its limit in {fmt.plural(len(checked), 'run')} "
        f"of authors sending past their quota ({limit} events each): {at_limit:,} of "
        f"{authors:,} authors were stored exactly up to it, none beyond."))]


def lease_round_trips(configs: list[Config]) -> list[Finding]:
    """Per scenario, each +lease client's round trips per response against its plain client's."""
    out = []
    for scen in scenarios_in_order(configs):
        if is_adaptive(scen[1]):
            continue
        impls = sorted({c.implementation for c in configs
                        if is_leased(c.implementation) and scenario(c) == scen}, key=impl_rank)
        parts = []
        for impl in impls:
            c = find(configs, impl, scen)
            if c is None or _trips(c) is None:
                continue
            plain = find(configs, plain_of(impl), scen, c.duration_s)
            part = f"{impl} {_trips(c):.2f}"
            if plain is None or not _trips(plain):
                part += f" (no {plain_of(impl)} round trips here to compare with)"
            else:
                part += (f" against {plain_of(impl)}'s {_trips(plain):.2f} "
                         f"({fmt.pct(_trips(c) / _trips(plain))} of them)")
            parts.append(part)
        if parts:
            out.append(Finding("Quota leases", (
                f"{_where(scen)}: Valkey round trips per response with leases, "
                f"{fmt.join_and(parts)}.")))
    return out


def client_settings(settings: list[SettingComparison]) -> list[Finding]:
    """Whether every quota client ran with the same timeouts (a difference is a confound)."""
    if not settings:
        return []
    unequal = [s for s in settings if s.unequal]
    equal = [s for s in settings if not s.unequal]
    out = []
    for s in unequal:
        parts = [f"{v} ({', '.join(impls)})" for v, impls in s.values if v != NOT_A_SETTING]
        out.append(Finding("Client settings", (
            f"Client {s.label} is not the same for every implementation: {'; '.join(parts)}. "
            f"Throughput and latency differences between these implementations mix the setting "
            f"with the client, so read them with care.")))
    if equal:
        parts = [f"{s.label} " + ", ".join(f"{v} ({', '.join(impls)})" for v, impls in s.values)
                 for s in equal]
        lead = ("The other client settings match" if unequal
                else "Every quota client ran with the same settings wherever its library has them")
        out.append(Finding("Client settings", f"{lead}: {'; '.join(parts)}."))
    return out


def rejection(configs: list[Config]) -> list[Finding]:
    out = []
    for scen in scenarios_in_order(configs):
        if scen[1] != "flood":
            continue
        flood = [c for c in configs if (c.mode, c.workload, c.connections) == scen
                 and c.req.median is not None]
        flood.sort(key=lambda c: impl_rank(c.implementation))
        if not flood:
            continue
        shares = [c.rejected_share.median for c in flood if c.rejected_share.median is not None]
        parts = []
        for c in flood:
            part = f"{c.implementation} {fmt.rate(c.req.median)} req/s"
            light = find(configs, c.implementation, (c.mode, "light", c.connections))
            if light is not None:
                part += f" ({c.req.median / light.req.median:.2f}× its light rate)"
            parts.append(part)
        blocks = {c.in_memory_block for c in flood}
        block = ("in-memory block on" if blocks == {True} else "in-memory block off"
                 if blocks == {False} else "in-memory block mixed")
        share = fmt.pct(median(shares))
        if len(shares) > 1 and maximum(shares) - minimum(shares) >= 0.001:
            share += f" ({fmt.pct(minimum(shares))}–{fmt.pct(maximum(shares))} across implementations)"
        out.append(Finding("Rejection path", (
            f"{_where(scen)}: {share} of responses were 429 ({block}); {fmt.join_and(parts)}.")))
    return out


def adaptive(configs: list[Config]) -> list[Finding]:
    groups: dict[tuple[str, int], list[Config]] = {}
    for c in configs:
        if c.is_adaptive and c.ok:
            groups.setdefault((c.mode, c.connections), []).append(c)
    out = []
    for (mode, _conn), cfgs in groups.items():
        cfgs.sort(key=lambda c: LAWS.index(c.law) if c.law in LAWS else len(LAWS))
        parts = []
        for c in cfgs:
            a = c.adaptive
            label = LAW_LABELS.get(c.law or "", c.workload)
            part = (f"{label} peaked at {fmt.times(a['peakUOverTarget'].median)} the memory target, "
                    f"{fmt.seconds(a['secondsAboveTarget'].median)} s above it, "
                    f"{fmt.count(a['emergencyEntries'].median)} emergency "
                    f"{'entry' if a['emergencyEntries'].median == 1 else 'entries'}")
            acc = a["acceptedShareOfSustainable"].median
            if acc is not None:
                part += f", admitting {fmt.times(acc)} the sustainable rate"
            parts.append(part)
        impls = sorted({c.implementation for c in cfgs}, key=impl_rank)
        runs = sorted({len(c.ok) for c in cfgs})
        out.append(Finding("Adaptive scenario", (
            f"Step load ({mode}, gateways on {', '.join(impls)}, median of "
            f"{'/'.join(map(str, runs))} {'run' if runs == [1] else 'runs'} per law): "
            f"{'; '.join(parts)}.")))
    return out


def variance(configs: list[Config]) -> list[Finding]:
    measured = [c for c in configs if c.req.cv is not None]
    high = [c for c in measured if c.high_variance]
    single = [c for c in configs if c.req.n == 1]
    out = []
    if high:
        parts = [f"{c.label} (CV {fmt.pct(c.req.cv)}, {fmt.rate(c.req.min)}–{fmt.rate(c.req.max)} "
                 f"req/s)" for c in high]
        out.append(Finding("Variance", (
            f"{fmt.plural(len(high), 'configuration')} of {len(measured)} with 2+ ok runs "
            f"{'varies' if len(high) == 1 else 'vary'} by more than {HIGH_CV:.0%} between runs "
            f"(CV of req/s): {'; '.join(parts)}. Differences and ratios involving "
            f"{'it' if len(high) == 1 else 'them'} are less certain.")))
    elif measured:
        top = max(measured, key=lambda c: c.req.cv)
        out.append(Finding("Variance", (
            f"No configuration varies by more than {HIGH_CV:.0%} between runs; the most variable "
            f"is {top.label} at CV {fmt.pct(top.req.cv)}.")))
    if single and len(single) == len(configs):
        out.append(Finding("Variance", (
            f"Every configuration ({len(configs)}) had a single ok run: no spread is known, so "
            f"no difference in this report can be told apart from run-to-run noise.")))
    elif single:
        out.append(Finding("Variance", (
            f"{fmt.plural(len(single), 'configuration')} had a single ok run, so "
            f"{'its' if len(single) == 1 else 'their'} spread is unknown: "
            f"{'; '.join(c.label for c in single)}.")))
    return out


def failed(configs: list[Config], runs: list[Run]) -> list[Finding]:
    bad = [r for r in runs if not r.ok]
    if not bad:
        return [Finding("Failed runs", f"No run failed ({fmt.plural(len(runs), 'run')}).")]
    partly = "; ".join(f"{c.label} run {', '.join(str(r.run) for r in c.failed)} "
                       f"({_reasons(c.failed)}; median of the other {len(c.ok)})"
                       for c in configs if c.status == "partial")
    text = f"{len(bad)} of {len(runs)} runs failed and are excluded from every figure."
    return [Finding("Failed runs", f"{text} Partly failed: {partly}." if partly else text),
            *(Finding("Failed runs", f"{c.label}: all {len(c.runs)} runs failed "
                                     f"({_reasons(c.failed)}), so it has no figures.")
              for c in configs if c.status == "failed")]


def _reasons(runs: list[Run]) -> str:
    reasons: list[str] = []
    for r in runs:
        for reason in r.failure_reasons or ["no reason recorded"]:
            if reason not in reasons:
                reasons.append(reason)
    return ", ".join(reasons)


def data_quality(configs: list[Config], unreadable: list, warnings: list[str]) -> list[Finding]:
    noisy = "; ".join(f"{c.label} ({fmt.rate(c.errors_per_s.median)} errors/s, "
                      f"{fmt.rate(c.other_per_s.median)} other non-2xx/s)"
                      for c in configs if c.errors_per_s.median or c.other_per_s.median)
    texts = (
        noisy and f"Runs counted ok but with errors or unexpected statuses: {noisy}.",
        unreadable and (f"{fmt.plural(len(unreadable), 'file')} could not be read and "
                        f"{'is' if len(unreadable) == 1 else 'are'} left out: "
                        f"{', '.join(u.file for u in unreadable)} (reasons under Unreadable "
                        f"files)."),
        warnings and (f"{fmt.plural(len(warnings), 'data warning')} (listed under Data "
                      f"warnings), e.g. {warnings[0]}"),
    )
    return [Finding("Data quality", t) for t in texts if t]


def key_findings(configs: list[Config], runs: list[Run], unreadable: list,
                 warnings: list[str],
                 settings: Optional[list[SettingComparison]] = None) -> list[Finding]:
    return [
        *fastest_client(configs),
        *quota_cost(configs),
        *peer(configs),
        *client_settings(settings or []),
        *valkey_round_trips(configs),
        *lease_accounting(configs),
        *limits_held(runs),
        *lease_round_trips(configs),
        *rejection(configs),
        *adaptive(configs),
        *variance(configs),
        *failed(configs, runs),
        *data_quality(configs, unreadable, warnings),
    ]
