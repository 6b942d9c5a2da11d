"""The price snapshot and usage → USD (pure): adjustments of SPEC §3, never a silent zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorage.costs import PriceSnapshot, TokenCounts, Usage, cost_usd, default_snapshot_path
from anchorage.errors import InputError


def test_repository_snapshot_loads(repo_root: Path) -> None:
    snapshot = PriceSnapshot.load(repo_root / "prices" / "2026-11.yaml")
    assert snapshot.version == "2026-11"
    assert snapshot.is_priced("gpt-5.5") and snapshot.is_priced("openai/gpt-5.5")
    assert default_snapshot_path().name == "2026-11.yaml"


def test_cached_input_and_output_prices(prices_file: Path) -> None:
    snapshot = PriceSnapshot.load(prices_file)
    counts = TokenCounts(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000)
    # 600k uncached × $1 + 400k cached × $0.5 + 100k output × $4 = 0.6 + 0.2 + 0.4
    assert cost_usd(counts, "mock-model", snapshot) == pytest.approx(1.2)
    assert cost_usd(counts, "mock-alias", snapshot) == pytest.approx(1.2)


def test_reasoning_outside_the_completion_counter_is_added_to_output(prices_file: Path) -> None:
    snapshot = PriceSnapshot.load(prices_file)
    inside = TokenCounts(input_tokens=0, output_tokens=1_000, reasoning_tokens=600, reasoning_in_output=True)
    outside = TokenCounts(input_tokens=0, output_tokens=400, reasoning_tokens=600, reasoning_in_output=False)
    assert inside.billed_output_tokens == outside.billed_output_tokens == 1_000
    assert cost_usd(inside, "mock-model", snapshot) == cost_usd(outside, "mock-model", snapshot)


def test_peak_price_is_billed(prices_file: Path) -> None:
    snapshot = PriceSnapshot.load(prices_file)
    counts = TokenCounts(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd(counts, "peak-model", snapshot) == pytest.approx(2.0 + 8.0)


def test_unknown_model_is_an_error_not_zero(prices_file: Path) -> None:
    snapshot = PriceSnapshot.load(prices_file)
    with pytest.raises(InputError, match="no price in snapshot test-1"):
        cost_usd(TokenCounts(input_tokens=10), "mystery", snapshot)


@pytest.mark.parametrize(("text", "message"), [
    ("models: {}", "version"),
    ("version: x\nmodels: {m: {input: 1}}", "both input and output"),
    ("version: x\nmodels: {m: {input: 1, output: 2, peak: {input: 1, output: 2}}}", "either"),
    ("version: x\nmodels: {m: {off_peak: {input: 1, output: 2}}}", "peak"),
    ("version: x\nmodels: {m: {input: -1, output: 2}}", "greater than or equal"),
    ("version: x\nmodels: {}\naliases: {a: missing}", "unknown models"),
    ("version: x\ncurrency: EUR\nmodels: {}", "USD"),
    ("version: [", "not valid YAML"),
], ids=["no-version", "half-flat", "both-shapes", "off-peak-only", "negative", "bad-alias", "currency", "yaml"])
def test_invalid_snapshots_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        PriceSnapshot.load(path)


def test_usage_round_trips_through_json() -> None:
    usage = Usage(requests=2, input_tokens=10, cost_usd=0.5, unpriced_models=["x"])
    usage.by_model["m"] = Usage(requests=2, input_tokens=10)
    again = Usage.from_dict(usage.to_dict())
    assert again == usage
