"""Trial tokens: the cache of verified tokens never changes who a token authenticates (or whether); the signed
claims (trial, entry, expiry, transcript) cannot be changed; expiry and revocation are checked every time."""

from __future__ import annotations

import time

import pytest

from anchorage.gateway import ledger as ledger_module
from anchorage.gateway.ledger import Ledger
from anchorage.gateway.tokens import mint_token, verify_token

SECRET = b"test-secret"


def trial_of(ledger: Ledger, token: str, now: float | None = None) -> str | None:
    auth = ledger.authenticate(token, now)
    return None if auth is None else auth[0].trial_id


def test_a_cached_token_still_names_its_own_trial_and_is_revocable() -> None:
    ledger = Ledger(SECRET, None)
    token_a, token_b = ledger.issue("trial-a"), ledger.issue("trial-b")
    for _ in range(2):  # the second pass is served from the cache
        assert trial_of(ledger, token_a) == "trial-a" and trial_of(ledger, token_b) == "trial-b"
    ledger.revoke("trial-a")
    assert ledger.authenticate(token_a) is None
    assert "revoked" in ledger.why_refused(token_a)
    assert ledger.authenticate(token_b) is not None


def test_forged_tokens_are_refused_before_and_after_a_valid_one_was_cached() -> None:
    ledger = Ledger(SECRET, None)
    token = ledger.issue("trial-a")
    forged = [mint_token(b"other-secret", "trial-a"), token + "x", token[:-1], "atk-" + token[4:].upper(),
              token.replace(".", ""), "atk-.", "atk-e30." + token.split(".")[1]]
    assert all(ledger.authenticate(f) is None for f in forged)
    assert ledger.authenticate(token) is not None
    assert all(ledger.authenticate(f) is None for f in forged)
    assert all("not signed by this gateway" in ledger.why_refused(f) for f in forged)


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "VERIFIED_TOKENS_KEPT", 3)
    ledger = Ledger(SECRET, None)
    tokens = [ledger.issue(f"trial-{i}") for i in range(10)]
    for index, token in enumerate(tokens):
        assert trial_of(ledger, token) == f"trial-{index}"
        assert len(ledger._verified) <= 3


def test_a_minted_token_carries_its_signed_entry() -> None:
    ledger = Ledger(SECRET, None)
    token = mint_token(SECRET, "ns.trial-a.uid-1", "astra")
    auth = ledger.authenticate(token)
    assert auth is not None and (auth[0].trial_id, auth[0].entry) == ("ns.trial-a.uid-1", "astra")
    # the entry is part of what is signed: swapping it (payload of another entry, same signature) fails
    other_payload = mint_token(SECRET, "ns.trial-a.uid-1", "zeta").split(".")[0]
    assert ledger.authenticate(other_payload + "." + token.split(".")[1]) is None
    # a token of the same trial without an entry names the same account (one ledger per trial)
    again = ledger.authenticate(mint_token(SECRET, "ns.trial-a.uid-1"))
    assert again is not None and again[0] is auth[0]
    ledger.revoke("ns.trial-a.uid-1")
    assert ledger.authenticate(token) is None


def test_an_expired_token_is_refused_and_its_expiry_cannot_be_extended() -> None:
    ledger = Ledger(SECRET, None)
    now = time.time()
    token = ledger.issue("trial-a", expires_at=now + 60)
    assert trial_of(ledger, token, now) == "trial-a"
    assert trial_of(ledger, token, now + 59) == "trial-a"  # served from the cache: expiry still checked
    assert ledger.authenticate(token, now + 61) is None
    assert "expired at" in ledger.why_refused(token, now + 61)
    # the expiry is signed: a payload with a later one and the old signature is not a token
    later = mint_token(SECRET, "trial-a", expires_at=now + 3600).split(".")[0]
    assert ledger.authenticate(later + "." + token.split(".")[1], now + 61) is None


def test_issued_tokens_expire_after_the_ttl_unless_given_an_expiry() -> None:
    ledger = Ledger(SECRET, None, token_ttl_seconds=100)
    claims = verify_token(SECRET, ledger.issue("trial-a"))
    assert claims is not None and claims.expires_at is not None
    assert time.time() + 98 <= claims.expires_at <= time.time() + 101
    claims = verify_token(SECRET, ledger.issue("trial-b", expires_at=1e10))
    assert claims is not None and claims.expires_at == 1e10
    forever = verify_token(SECRET, Ledger(SECRET, None).issue("trial-c"))  # no ttl, no expiry: never expires
    assert forever is not None and forever.expires_at is None


@pytest.mark.parametrize("trial_id, entry", [("trial#1", "a#b"), ("ns.name.uid", None), ("tâche-é", "entrée ü"),
                                             ('quote"d', "x.y")])
def test_any_trial_id_and_entry_round_trip(trial_id: str, entry: str | None) -> None:
    claims = verify_token(SECRET, mint_token(SECRET, trial_id, entry, transcript=True))
    assert claims is not None and (claims.trial_id, claims.entry, claims.transcript) == (trial_id, entry, True)
    plain = verify_token(SECRET, mint_token(SECRET, trial_id, entry))
    assert plain is not None and plain.transcript is False


def test_an_empty_trial_id_is_refused() -> None:
    with pytest.raises(ledger_module.InputError, match="empty"):
        mint_token(SECRET, "")
