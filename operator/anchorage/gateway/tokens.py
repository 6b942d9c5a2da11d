"""Trial tokens: HMAC-signed claims naming one trial, its entry, an expiry and whether to keep a transcript.

Minted by the gateway's ledger (:meth:`anchorage.gateway.ledger.Ledger.issue`, the local engine) and by the
operator (``anchorage.controller.metering``, with the secret it shares with the gateway), verified by the
ledger on every request. A token is ``atk-<claims>.<signature>``: the claims are compact JSON
(``{"t": trial id, "e": entry, "x": expiry in Unix seconds, "c": 1 to capture a transcript}``) in
base64url, the signature the first 24 bytes of HMAC-SHA256 over those exact bytes. Without the secret a
token cannot be made for another trial, a later expiry or another entry. Signatures are compared in
constant time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass

from anchorage.errors import InputError

TOKEN_PREFIX = "atk-"
SIGNATURE_BYTES = 24
#: What the operator adds to a trial's deadline for its token's expiry: pod scheduling, image pulls and
#: the trial's own clean-up run after the agent's clock started.
EXPIRY_MARGIN_SECONDS = 900.0


@dataclass(frozen=True)
class TokenClaims:
    """What a verified token says: the trial, its entry and campaign (metric labels), expiry, transcript capture."""

    trial_id: str
    entry: str | None = None
    expires_at: float | None = None  # Unix seconds; None: the token never expires
    transcript: bool = False
    campaign: str | None = None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()[:SIGNATURE_BYTES]


def mint_token(secret: bytes, trial_id: str, entry: str | None = None, *, expires_at: float | None = None,
               transcript: bool = False, campaign: str | None = None) -> str:
    """The bearer token of ``trial_id`` under ``secret`` (deterministic for the same claims).

    ``entry`` and ``campaign`` label the trial's tokens and cost in the gateway's metrics; ``expires_at`` (Unix seconds,
    whole seconds kept) ends the token's validity; ``transcript`` asks the gateway to keep the trial's
    request and response bodies (only when its config allows transcripts).
    """
    if not trial_id:
        raise InputError("trial id is empty", hint="pass the trial's name")
    claims: dict[str, object] = {"t": trial_id}
    if entry is not None:
        claims["e"] = entry
    if campaign is not None:
        claims["k"] = campaign
    if expires_at is not None:
        claims["x"] = int(expires_at)
    if transcript:
        claims["c"] = 1
    payload = json.dumps(claims, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")
    return f"{TOKEN_PREFIX}{_b64(payload)}.{_b64(_signature(secret, payload))}"


def verify_token(secret: bytes, token: str) -> TokenClaims | None:
    """The claims of a token signed with ``secret``, or None when it is malformed or its signature is wrong.

    Expiry is *not* checked here (the caller checks it on every request: :meth:`TokenClaims.expired`).
    """
    if not token.startswith(TOKEN_PREFIX):
        return None
    encoded, dot, encoded_signature = token[len(TOKEN_PREFIX):].partition(".")
    if not dot:
        return None
    try:
        payload, signature = _unb64(encoded), _unb64(encoded_signature)
    except ValueError:
        return None
    if not hmac.compare_digest(_signature(secret, payload), signature):
        return None
    return _claims(payload)


def _claims(payload: bytes) -> TokenClaims | None:
    """Parse signed claims (a signed payload we cannot read is refused, never guessed at)."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("t"), str) or not data["t"]:
        return None
    entry, expires, campaign = data.get("e"), data.get("x"), data.get("k")
    if (entry is not None and not isinstance(entry, str)) or (campaign is not None and not isinstance(campaign, str)) or \
            (expires is not None and (not isinstance(expires, int) or isinstance(expires, bool))):
        return None
    return TokenClaims(data["t"], entry, None if expires is None else float(expires), data.get("c") == 1, campaign)


def trial_of_token(secret: bytes, token: str) -> str | None:
    """The trial a token was minted for, or None when it is malformed or its signature is wrong."""
    claims = verify_token(secret, token)
    return claims.trial_id if claims is not None else None


def same_secret(given: str, expected: str) -> bool:
    """Compare a presented secret (admin token, provider key) with the expected one in constant time."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
