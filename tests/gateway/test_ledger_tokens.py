"""The ledger's cache of verified tokens never changes who a token authenticates (or whether)."""

from __future__ import annotations

import pytest

from anchorage.gateway import ledger as ledger_module
from anchorage.gateway.ledger import Ledger, mint_token

SECRET = b"test-secret"


def test_a_cached_token_still_names_its_own_trial_and_is_revocable() -> None:
    ledger = Ledger(SECRET, None)
    token_a, token_b = ledger.issue("trial-a"), ledger.issue("trial-b")
    for _ in range(2):  # the second pass is served from the cache
        account_a, account_b = ledger.authenticate(token_a), ledger.authenticate(token_b)
        assert account_a is not None and account_a.trial_id == "trial-a"
        assert account_b is not None and account_b.trial_id == "trial-b"
    ledger.revoke("trial-a")
    assert ledger.authenticate(token_a) is None
    assert ledger.authenticate(token_b) is not None


def test_forged_tokens_are_refused_before_and_after_a_valid_one_was_cached() -> None:
    ledger = Ledger(SECRET, None)
    token = ledger.issue("trial-a")
    forged = [mint_token(b"other-secret", "trial-a"), token + "x", token[:-1], "atk-" + token[4:].upper()]
    assert all(ledger.authenticate(f) is None for f in forged)
    assert ledger.authenticate(token) is not None
    assert all(ledger.authenticate(f) is None for f in forged)


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "VERIFIED_TOKENS_KEPT", 3)
    ledger = Ledger(SECRET, None)
    tokens = [ledger.issue(f"trial-{i}") for i in range(10)]
    for index, token in enumerate(tokens):
        account = ledger.authenticate(token)
        assert account is not None and account.trial_id == f"trial-{index}"
        assert len(ledger._verified) <= 3


def test_a_minted_token_carries_its_signed_entry() -> None:
    ledger = Ledger(SECRET, None)
    token = mint_token(SECRET, "ns.trial-a.uid-1", "astra")
    account = ledger.authenticate(token)
    assert account is not None and (account.trial_id, account.entry) == ("ns.trial-a.uid-1", "astra")
    # the entry is part of what is signed: swapping it (payload of another entry, same signature) fails
    other_payload = mint_token(SECRET, "ns.trial-a.uid-1", "zeta").split(".")[0]
    assert ledger.authenticate(other_payload + "." + token.split(".")[1]) is None
    # a token of the same trial without an entry names the same account (one ledger per trial)
    assert ledger.authenticate(mint_token(SECRET, "ns.trial-a.uid-1")) is account
    ledger.revoke("ns.trial-a.uid-1")
    assert ledger.authenticate(token) is None


def test_a_trial_id_with_the_entry_separator_is_refused() -> None:
    with pytest.raises(ledger_module.InputError, match="contains '#'"):
        mint_token(SECRET, "trial#1")
