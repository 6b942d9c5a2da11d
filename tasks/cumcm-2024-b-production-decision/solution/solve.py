"""Oracle reproduction for CUMCM 2024 B (production-process decisions), written for Anchorage.

Called by ``solution/solve.sh`` (Harbor convention, ``anchorage oracle``) and by
``tests/anchors/test_production_decision.py``. Reads the official statement
(``$ANCHORAGE_DATA_DIR/problem.md``, default ``/root/data``), parses its Tables 1 and 2, and writes
``$ANCHORAGE_RESULTS_DIR/cumcm-2024-b-production-decision_result.json`` (default ``/root/results``).

Method (see solution/README.md for the accounting convention and its caveats):

* Q1 — single-sampling plans: the smallest n (then c) with false alarm P(X >= c | 10 %) <= 5 % and
  power P(X >= c | 15 %) >= 80 % (reject plan), and P(X <= c | 10 %) >= 90 %,
  P(X <= c | 15 %) <= 20 % (accept plan); exact binomial tails.
* Q2/Q3 — every decision vector is enumerated (16 per Q2 case, 2**16 for Q3) and its expected
  single-pass profit per finished unit is computed in exact rational arithmetic.
* Q4 — each 10 % defect rate is replaced by the Beta(1, 1) posterior mean after observing
  k in {c-2, c, c+2} defectives in the reject plan's n draws; Q2 case 1 and Q3 are re-optimised.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from scipy.stats import beta, binom

SLUG = "cumcm-2024-b-production-decision"
NOMINAL = 0.10            # statement, Q1: nominal defect rate
ALT = 0.15                # our alternative hypothesis for the power / accept-bad criterion
ALPHA, POWER = 0.05, 0.80  # Q1 (1): 95 % confidence to reject; power we require
ACCEPT_GOOD, ACCEPT_BAD = 0.90, 0.20  # Q1 (2): 90 % confidence to accept
# Figure 1 of the statement (an image, so not parsed): parts 1-3 -> semi 1, 4-6 -> semi 2,
# 7-8 -> semi 3, semis 1-3 -> finished product.
Q3_GROUPS = ((0, 1, 2), (3, 4, 5), (6, 7))


@dataclass(frozen=True)
class Part:
    p: Fraction      # defect rate
    cost: Fraction   # purchase price
    check: Fraction  # inspection cost


@dataclass(frozen=True)
class Assembly:
    p: Fraction
    cost: Fraction      # assembly cost
    check: Fraction     # inspection cost
    dismantle: Fraction  # dismantling fee


@dataclass(frozen=True)
class Line:
    """A two-level production line: parts -> (optional semi-finished groups) -> product."""

    parts: tuple[Part, ...]
    groups: tuple[tuple[int, ...], ...]   # empty: the parts go straight into the product
    semis: tuple[Assembly, ...]
    product: Assembly
    price: Fraction
    exchange_loss: Fraction

    @property
    def n_bits(self) -> int:
        return len(self.parts) + 2 * len(self.semis) + 2

    def with_rate(self, rate: Fraction) -> Line:
        """The same line with every defect rate replaced by ``rate`` (Q4 scenarios)."""
        return replace(
            self,
            parts=tuple(replace(x, p=rate) for x in self.parts),
            semis=tuple(replace(x, p=rate) for x in self.semis),
            product=replace(self.product, p=rate),
        )


def _frac(text: str) -> Fraction:
    return Fraction(text)


def _pct(text: str) -> Fraction:
    return Fraction(text) / 100


def read_statement(data_dir: Path) -> str:
    path = data_dir / "problem.md"
    if not path.is_file():
        sys.exit(f"error: {path} not found; set ANCHORAGE_DATA_DIR to the task's environment/data")
    return path.read_text(encoding="utf-8")


def parse_table1(text: str) -> list[Line]:
    """Table 1 rows: case, then (p, price, check) x 2 parts, (p, assembly, check) product,
    market price, exchange loss, dismantling fee."""
    section = text.split("表 1", 1)[1].split("问题 3", 1)[0]
    num = r"(\d+(?:\.\d+)?)"
    row = re.compile(rf"^([1-6]) {num}% {num} {num} {num}% {num} {num} {num}% {num} {num} {num} {num} {num}\s*$",
                     re.MULTILINE)
    lines = []
    for m in row.finditer(section):
        g = m.groups()
        parts = (Part(_pct(g[1]), _frac(g[2]), _frac(g[3])), Part(_pct(g[4]), _frac(g[5]), _frac(g[6])))
        product = Assembly(_pct(g[7]), _frac(g[8]), _frac(g[9]), _frac(g[12]))
        lines.append(Line(parts, (), (), product, _frac(g[10]), _frac(g[11])))
    if len(lines) != 6:
        sys.exit(f"error: expected the 6 cases of Table 1 in problem.md, found {len(lines)}")
    return lines


def parse_table2(text: str) -> Line:
    """Table 2: 8 parts, 3 semi-finished products, the finished product, price and exchange loss."""
    section = text.split("表 2", 1)[1].split("问题 4", 1)[0]
    parts: dict[int, Part] = {}
    semis: dict[int, Assembly] = {}
    for m in re.finditer(r"^([1-8]) (\d+)% (\d+) (\d+)(?: ([1-3]) (\d+)% (\d+) (\d+) (\d+))?", section, re.MULTILINE):
        g = m.groups()
        parts[int(g[0])] = Part(_pct(g[1]), _frac(g[2]), _frac(g[3]))
        if g[4] is not None:
            semis[int(g[4])] = Assembly(_pct(g[5]), _frac(g[6]), _frac(g[7]), _frac(g[8]))
    product_m = re.search(r"成品 (\d+)% (\d+) (\d+) (\d+)", section)
    market_m = re.search(r"成品 (\d+) (\d+)\s*$", section, re.MULTILINE)
    if len(parts) != 8 or len(semis) != 3 or product_m is None or market_m is None:
        sys.exit("error: could not read Table 2 (8 parts, 3 semi-finished, product, market) from problem.md")
    pg = product_m.groups()
    return Line(
        parts=tuple(parts[i] for i in range(1, 9)),
        groups=Q3_GROUPS,
        semis=tuple(semis[i] for i in range(1, 4)),
        product=Assembly(_pct(pg[0]), _frac(pg[1]), _frac(pg[2]), _frac(pg[3])),
        price=_frac(market_m.group(1)),
        exchange_loss=_frac(market_m.group(2)),
    )


def _part_flow(part: Part, inspect: int) -> tuple[Fraction, Fraction]:
    """(expected cost per part entering assembly, probability it is good)."""
    if inspect:
        return (part.cost + part.check) / (1 - part.p), Fraction(1)
    return part.cost, 1 - part.p


def _assemble(inputs: list[tuple[Fraction, Fraction]], node: Assembly) -> tuple[Fraction, Fraction]:
    cost = sum((c for c, _ in inputs), Fraction(0)) + node.cost
    good = Fraction(1)
    for _, q in inputs:
        good *= q
    return cost, good * (1 - node.p)


def _stage_flows(line: Line, part_bits: tuple[int, ...], semi_bits: tuple[int, ...]) -> list[tuple[Fraction, Fraction]]:
    """Exact cost and good probability of each input of the final assembly."""
    n_semis = len(line.semis)
    flows = [_part_flow(part, part_bits[i]) for i, part in enumerate(line.parts)]
    if not line.groups:
        return flows
    out = []
    for k, (group, semi) in enumerate(zip(line.groups, line.semis, strict=True)):
        cost, good = _assemble([flows[i] for i in group], semi)
        if semi_bits[k]:
            cost += semi.check + semi_bits[n_semis + k] * semi.dismantle * (1 - good)
            good = Fraction(1)
        out.append((cost, good))
    return out


def _finish(line: Line, flows: list[tuple[Fraction, Fraction]], inspect: int, dismantle: int) -> tuple[Fraction, Fraction]:
    cost, good = _assemble(flows, line.product)
    scrap = dismantle * line.product.dismantle * (1 - good)
    if inspect:
        return line.price * good - cost - line.product.check - scrap, good
    return line.price - cost - line.exchange_loss * (1 - good) - scrap, good


def profit(line: Line, bits: tuple[int, ...]) -> tuple[Fraction, Fraction]:
    """Expected single-pass profit per finished unit and the good probability of a unit before the
    final inspection. Bit order: parts' inspection, semis' inspection, semis' dismantling,
    product inspection, product dismantling."""
    n_parts = len(line.parts)
    return _finish(line, _stage_flows(line, bits[:n_parts], bits[n_parts:-2]), bits[-2], bits[-1])


def _float_profits(line: Line) -> list[float]:
    """Float profit of every decision vector, in itertools.product order (screening pass).
    The inputs of the final assembly are evaluated once per distinct sub-decision."""
    n_parts = len(line.parts)
    cache: dict[tuple[int, ...], tuple[float, float]] = {}
    node = line.product
    price, loss, a, p = float(line.price), float(line.exchange_loss), float(node.cost), float(node.p)
    check, fee = float(node.check), float(node.dismantle)
    out = []
    for bits in itertools.product((0, 1), repeat=line.n_bits):
        key = bits[:-2]
        if key not in cache:
            flows = _stage_flows(line, bits[:n_parts], bits[n_parts:-2])
            good_in = 1.0
            for _, q in flows:
                good_in *= float(q)
            cache[key] = (float(sum(c for c, _ in flows)) + a, good_in * (1.0 - p))
        cost, good = cache[key]
        scrap = bits[-1] * fee * (1.0 - good)
        if bits[-2]:
            out.append(price * good - cost - check - scrap)
        else:
            out.append(price - cost - loss * (1.0 - good) - scrap)
    return out


def best_policy(line: Line) -> tuple[tuple[int, ...], Fraction, Fraction, int]:
    """Exhaustive search over every decision vector. A float pass screens all vectors; every vector
    within 1e-7 of the float optimum is re-evaluated in exact rational arithmetic, so the reported
    optimum and its tie-break (fewer actions, then the smaller vector) are exact."""
    vectors = list(itertools.product((0, 1), repeat=line.n_bits))
    values = _float_profits(line)
    top = max(values)
    near = [bits for bits, value in zip(vectors, values, strict=True) if value >= top - 1e-7 * max(1.0, abs(top))]
    exact = [(profit(line, bits), bits) for bits in near]
    best_value = max(value for (value, _), _ in exact)
    winners = sorted((sum(bits), bits, good) for (value, good), bits in exact if value == best_value)
    _, bits, good = winners[0]
    return bits, best_value, good, len(vectors)


def reject_plan() -> dict[str, Any]:
    for n in itertools.count(1):
        c = int(binom.isf(ALPHA, n, NOMINAL)) + 1   # smallest c with P(X >= c) <= alpha
        while binom.sf(c - 1, n, NOMINAL) > ALPHA:
            c += 1
        if binom.sf(c - 1, n, ALT) >= POWER:
            return {"mode": "reject_high", "n": n, "c": c,
                    "false_alarm": round(float(binom.sf(c - 1, n, NOMINAL)), 6),
                    "power": round(float(binom.sf(c - 1, n, ALT)), 6)}
    raise AssertionError("unreachable")


def accept_plan() -> dict[str, Any]:
    for n in itertools.count(1):
        c = int(binom.ppf(ACCEPT_BAD, n, ALT))       # largest c with P(X <= c | alt) <= 20 %
        while c >= 0 and binom.cdf(c, n, ALT) > ACCEPT_BAD:
            c -= 1
        if c >= 0 and binom.cdf(c, n, NOMINAL) >= ACCEPT_GOOD:
            return {"mode": "accept_good", "n": n, "c": c,
                    "accept_good": round(float(binom.cdf(c, n, NOMINAL)), 6),
                    "accept_bad": round(float(binom.cdf(c, n, ALT)), 6)}
    raise AssertionError("unreachable")


def q2_block(cases: list[Line]) -> dict[str, Any]:
    rows, total = [], 0
    for number, line in enumerate(cases, start=1):
        bits, value, good, count = best_policy(line)
        total += count
        rows.append({"case": number, "inspect_part1": bits[0], "inspect_part2": bits[1],
                     "inspect_final": bits[2], "dismantle_bad_final": bits[3],
                     "good_probability": round(float(good), 6), "expected_profit": round(float(value), 6)})
    mean = sum(r["expected_profit"] for r in rows) / len(rows)
    return {"enumerated_decisions": total, "best_decisions": rows, "best_profit_mean": round(mean, 6)}


def q4_block(case1: Line, q3: Line, plan: dict[str, Any]) -> dict[str, Any]:
    n, c = plan["n"], plan["c"]
    rows = []
    for k in (c - 2, c, c + 2):
        rate = Fraction(k + 1, n + 2)                 # Beta(1 + k, 1 + n - k) posterior mean
        _, q2_value, _, _ = best_policy(case1.with_rate(rate))
        q3_bits, q3_value, _, _ = best_policy(q3.with_rate(rate))
        rows.append({
            "observed_defects": k,
            "posterior_mean_defect_rate": round(float(rate), 5),
            "posterior_q95_defect_rate": round(float(beta.ppf(0.95, 1 + k, 1 + n - k)), 5),
            "q2_best_profit_case1": round(float(q2_value), 4),             # the anchor's precision
            "q3_best_policy_profit_under_posterior": round(float(q3_value), 4),
            "q2_best_profit_case1_exact": str(q2_value),                      # exact rational
            "q3_best_policy_profit_exact": str(q3_value),
            "q3_best_policy_bits": list(q3_bits),
        })
    return {"sample_size": n, "prior": "Beta(1, 1)", "posterior_rows": rows,
            "method": "Beta conjugate posterior mean of every defect rate (n draws of the Q1 reject plan, "
                      "k = c-2, c, c+2 defectives) fed to the exact enumeration of Q2 case 1 and Q3"}


def build(data_dir: Path) -> dict[str, Any]:
    text = read_statement(data_dir)
    cases, q3 = parse_table1(text), parse_table2(text)
    plan_reject, plan_accept = reject_plan(), accept_plan()
    q3_bits, q3_value, q3_good, q3_count = best_policy(q3)
    return {
        "problem_id": "2024-B",
        "paper_id": "B159",
        "paper_title": "生产过程中的决策优化设计",
        "official_problem": "problem.md (CUMCM 2024 B statement, Tables 1-2)",
        "reproduction_level": "exact_enumeration",
        "reproduction_scope": "Anchorage's own reproduction: exact binomial sampling plans, exhaustive "
                              "enumeration of every decision vector with exact rational expected profit "
                              "(B159 single-pass accounting), Beta posterior scenarios for Q4.",
        "methods": "binomial acceptance sampling + exhaustive decision enumeration + Beta conjugate posterior",
        "experiment_result": {
            "q1_sampling": [plan_reject, plan_accept],
            "q2": q2_block(cases),
            "q3": {"decision_bits": list(q3_bits), "best_expected_profit": round(float(q3_value), 6),
                   "good_probability_before_final_inspection": round(float(q3_good), 6),
                   "generations": 0, "enumerated_policies": q3_count,
                   "bit_order": "inspect part 1-8, inspect semi 1-3, dismantle semi 1-3, "
                                "inspect product, dismantle product"},
            "q4": q4_block(cases[0], q3, plan_reject),
            "artifact_paths": [],
        },
        "artifacts": [],
    }


def main() -> int:
    data_dir = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    results_dir = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results"))
    started = time.perf_counter()
    result = build(data_dir)
    result["experiment_result"]["runtime_seconds"] = round(time.perf_counter() - started, 2)
    results_dir.mkdir(parents=True, exist_ok=True)
    out = results_dir / f"{SLUG}_result.json"
    out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    for row in result["experiment_result"]["q4"]["posterior_rows"]:
        print(f"k={row['observed_defects']}: q2 case1 {row['q2_best_profit_case1']:.4f}  "
              f"q3 {row['q3_best_policy_profit_under_posterior']:.4f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
