"""Replay check for MCM 2025 C (Olympic medals): a degenerate great-coach effect (seed G.4, the Olympics class).

Declared as ``olympics_coach_effect`` (``CHECK``) and named in the task's ``tests/invariants.yaml``; run by
:func:`anchorage.invariants.gates.check`. The coach effect is the medal gain a great coach brings, as the
final question asks for it: ``great_coach_model.recommendations[i].estimated_medal_count_gain`` of the three
scored recommendations (the fourth is excluded from the panel, G.3). Each gives one result,
``olympics_coach_effect_<i>`` (hard), failed when the gain is

* zero or negative (no effect, or the wrong sign);
* not finite: NaN, ±Infinity (as a JSON constant or a string such as ``"inf"``), or a number past any float;
* implausibly large: more than :data:`MAX_COACH_GAIN` medals.

**The bound, from the task's data** (``summerOly_medal_counts.csv`` and ``summerOly_hosts.csv``, computed by
:func:`largest_rise`): a great coach works in one sport, so the medals it adds to a country cannot exceed
what a country ever added in *all* sports together from one Summer Games to the next. The largest such rise
in the data outside a host's own Games is East Germany's, 1968 → 1972: 25 → 66 medals, +41. Host Games are
left out because the host effect is a different effect, modelled separately by the task
(``host_effect_model``) and large: the United States +183 in 1904, Great Britain +144 in 1908. The bound is
generous on purpose (the seed penalised one Olympics answer in ~250 cells): the anchor's gains are 1.67, 2
and 3 medals, v4 pro's published 2, 2 and 2; the mock model's placeholders (5–95 medals) mostly fail.
``tests/invariants/test_seed_penalties.py`` recomputes the bound from the task's CSVs.

Missing or non-numeric gains (a string such as ``"about 2"``) are missing evidence (a warning), never a
violation. ``great_coach_model.global_top_jump_75pct`` is not the coach effect (it is a percentile of
historical jumps; v4 pro's published 0, which the report did not penalise, is a legitimate value of it) —
its sign invariant is one of this project's gates (``strict``).
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from anchorage import numbers
from anchorage.invariants.replays import ReplayCheck
from anchorage.invariants.results import GateResult
from anchorage.invariants.units import non_finite

MAX_COACH_GAIN = 41
"""Medals: the largest rise of a country's Summer Games total from one Games to the next, host Games left out
(East Germany 1968 → 1972, 25 → 66), from the task's ``summerOly_medal_counts.csv`` (:func:`largest_rise`)."""
SCORED = 3
PATH = "great_coach_model.recommendations[{i}].estimated_medal_count_gain"
HOST_ALIASES = {"United Kingdom": "Great Britain"}
"""Host country names of ``summerOly_hosts.csv`` as ``summerOly_medal_counts.csv`` spells the team."""


class Rise(NamedTuple):
    """A country's rise in total medals between two consecutive Summer Games."""

    country: str
    before: int
    after: int
    year_before: int
    year: int

    @property
    def medals(self) -> int:
        return self.after - self.before


def largest_rise(medal_counts: Path, hosts: Path) -> Rise:
    """The largest rise of a country's total medals from one Summer Games to the next (both in the table),
    the host of the later Games left out. :class:`ValueError` when a held Games' host is not a team of it."""
    totals: dict[int, dict[str, int]] = {}
    with medal_counts.open(encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            totals.setdefault(int(row["Year"]), {})[row["NOC"].strip()] = int(row["Total"])
    host_of: dict[int, str] = {}
    with hosts.open(encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            country = re.sub(r"\(.*?\)", "", row["Host"].replace("\xa0", " ")).split(",")[-1].strip()
            host_of[int(row["Year"])] = HOST_ALIASES.get(country, country)
    years = sorted(totals)
    for year in years:
        if host_of.get(year) not in totals[year]:
            raise ValueError(f"the host of {year} ({host_of.get(year)!r}) is not a team of that year's medal table")
    rises = [Rise(country, totals[before][country], total, before, year)
             for before, year in itertools.pairwise(years)
             for country, total in totals[year].items()
             if country in totals[before] and country != host_of[year]]
    return max(rises, key=lambda r: (r.medals, -r.year))


class _Gain(NamedTuple):
    value: float | None     # the gain, when it is a finite number
    shown: str              # how it reads in a message
    problem: str | None     # why it is degenerate before any bound (not finite), else None


def _read(raw: Any) -> _Gain | None:
    """The gain as read; None is missing evidence (absent, null, or a non-number that is not a non-finite one)."""
    reading = numbers.read(raw)
    if reading.kind == "number" and reading.number is not None:
        return _Gain(reading.number, f"{reading.number:g}", None)
    if reading.kind == "non_numeric" and non_finite(raw):
        return _Gain(None, repr(raw) if isinstance(raw, str) else str(raw), "not finite")
    return None


def _one(data: Mapping[str, Any], index: int) -> GateResult:
    path = PATH.format(i=index)
    name = f"olympics_coach_effect_{index + 1}"
    node: Any = data.get("great_coach_model")
    node = node.get("recommendations") if isinstance(node, Mapping) else None
    node = node[index] if isinstance(node, list) and index < len(node) else None
    raw = node.get("estimated_medal_count_gain") if isinstance(node, Mapping) else None
    gain = _read(raw)
    if gain is None:
        why = numbers.read(raw).reason if node is not None else "not reported"
        return GateResult(name=name, form="replay", paths=(path,), status="missing", severity="warning",
                          message=f"missing evidence: {path}: {why}")
    problem = gain.problem
    if problem is None and gain.value is not None:
        if gain.value <= 0:
            problem = "zero: no coach effect" if gain.value == 0 else "negative: a coach that loses medals"
        elif gain.value > MAX_COACH_GAIN:
            problem = (f"implausibly large: above {MAX_COACH_GAIN} medals, the largest rise of any country's total "
                       "over all sports from one Games to the next outside host Games (the task's medal counts)")
    values = {path: gain.shown}
    if problem is not None:
        return GateResult(name=name, form="replay", paths=(path,), status="failed", severity="hard",
                          message=f"degenerate coach effect: {path} = {gain.shown} is {problem} (seed G.4)",
                          values=values)
    return GateResult(name=name, form="replay", paths=(path,), status="passed", severity="hard",
                      message=f"coach effect {gain.shown} medals: positive, finite and at most {MAX_COACH_GAIN}",
                      values=values)


def olympics_coach_effect(data: Mapping[str, Any]) -> list[GateResult]:
    """One result per scored recommendation (see the module docstring)."""
    return [_one(data, i) for i in range(SCORED)]


CHECK = ReplayCheck("olympics_coach_effect", olympics_coach_effect)
