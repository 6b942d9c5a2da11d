"""Per-trial bearer tokens, limits and usage ledger of the gateway (thread-safe; durable with a journal).

Used by the gateway's request handlers (authenticate, admit, record) and by the :class:`Gateway`
handle the engine holds (issue, usage, revoke) from another thread. Tokens are HMAC-signed trial ids
(``atk-<trial[#entry], base64url>.<signature>``): a token names exactly one trial (and, minted by the
operator, its leaderboard entry, for the per-entry metrics) and cannot be forged for another without the
gateway's secret, so in a cluster the operator can mint tokens with the shared
secret and a restarted gateway still accepts them. Accounts live in memory; with a
:class:`~anchorage.gateway.journal.Journal` (``ledger_dir``) every issue, finished request and
revocation is also journalled and replayed at start-up, so usage and revocations survive a restart.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from anchorage.costs import PriceSnapshot, TokenCounts, Usage, cost_usd
from anchorage.errors import InfrastructureError, InputError
from anchorage.gateway.journal import Journal

TOKEN_PREFIX = "atk-"
ENTRY_SEP = "#"  # between the trial id and the entry in a token's signed claims
RATE_WINDOW_SECONDS = 60.0
VERIFIED_TOKENS_KEPT = 4096  # tokens whose signature was checked, so a request skips the HMAC


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_token(secret: bytes, trial_id: str, entry: str | None = None) -> str:
    """The bearer token of ``trial_id`` under ``secret`` (deterministic).

    ``entry`` (the trial's leaderboard entry, for the gateway's per-entry metrics) is signed with the
    trial id: a token minted by the operator carries it, as :meth:`Ledger.issue` records it locally.
    """
    if ENTRY_SEP in trial_id:
        raise InputError(f"trial id {trial_id!r} contains {ENTRY_SEP!r}, which separates a token's trial id and entry",
                         hint="name trials with letters, digits, '-', '_' and '.'")
    claims = trial_id if entry is None else f"{trial_id}{ENTRY_SEP}{entry}"
    signature = hmac.new(secret, claims.encode("utf-8"), hashlib.sha256).digest()[:24]
    return f"{TOKEN_PREFIX}{_b64(claims.encode('utf-8'))}.{_b64(signature)}"


def token_claims(secret: bytes, token: str) -> tuple[str, str | None] | None:
    """(trial id, entry or None) a token was minted for, or None when it is malformed or its signature is wrong."""
    if not token.startswith(TOKEN_PREFIX) or "." not in token:
        return None
    encoded, _, _sig = token[len(TOKEN_PREFIX):].partition(".")
    try:
        claims = _unb64(encoded).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    trial_id, sep, entry = claims.partition(ENTRY_SEP)
    if not hmac.compare_digest(mint_token(secret, trial_id, entry if sep else None), token):
        return None
    return trial_id, (entry if sep else None)


def trial_of_token(secret: bytes, token: str) -> str | None:
    """The trial a token was minted for, or None when it is malformed or its signature is wrong."""
    claims = token_claims(secret, token)
    return claims[0] if claims is not None else None


@dataclass
class TrialAccount:
    """One trial's limits, usage and recent request times."""

    trial_id: str
    entry: str | None = None
    budget_usd: float | None = None
    rate_per_min: float | None = None
    usage: Usage = field(default_factory=Usage)
    recent: deque[float] = field(default_factory=deque)


@dataclass(frozen=True)
class Refusal:
    """Why a request was not forwarded (rate or budget), with a retry hint in seconds."""

    kind: str
    message: str
    retry_after: float | None = None


class Ledger:
    """All trials' accounts behind one lock."""

    def __init__(self, secret: bytes, snapshot: PriceSnapshot | None, *,
                 default_budget_usd: float | None = None, default_rate_per_min: float | None = None,
                 journal: Journal | None = None) -> None:
        self._secret = secret
        self._snapshot = snapshot
        self._defaults = (default_budget_usd, default_rate_per_min)
        self._lock = threading.Lock()
        self._accounts: dict[str, TrialAccount] = {}
        self._revoked: set[str] = set()
        self._verified: dict[str, tuple[str, str | None]] = {}  # token -> claims, only tokens whose signature matched
        self._journal = journal
        self._last_seq = 0  # sequence number of the newest journal record
        if journal is not None:
            self._replay(journal)
            journal.rewrite(self._compacted())

    @property
    def journal(self) -> Journal | None:
        return self._journal

    async def synced(self) -> None:
        """Return once every change made so far is in the journal (at once without a journal)."""
        if self._journal is not None and self._last_seq:
            await self._journal.wait(self._last_seq)

    def synced_wait(self, timeout: float = 30.0) -> None:
        """:meth:`synced` for threads other than the gateway's event loop (blocks)."""
        if self._journal is not None and self._last_seq:
            self._journal.wait_sync(self._last_seq, timeout)

    def close(self) -> None:
        """Write out what the journal has queued and close it (the ledger stays readable)."""
        if self._journal is not None:
            self._journal.close()

    def _log(self, record: dict[str, Any]) -> None:
        """Journal ``record`` (call with the lock held, so the journal's order is the ledger's)."""
        if self._journal is not None:
            self._last_seq = self._journal.append(record)
            if self._journal.wants_compaction():
                self._journal.compact(self._compacted())

    @property
    def snapshot(self) -> PriceSnapshot | None:
        return self._snapshot

    def issue(self, trial_id: str, *, budget_usd: float | None = None, rate_per_min: float | None = None,
              entry: str | None = None) -> str:
        if not trial_id:
            raise InputError("trial_id is empty", hint="pass the trial's name")
        with self._lock:
            account = self._issue(trial_id, budget_usd, rate_per_min, entry)
            self._log({"op": "issue", "trial": trial_id, "entry": account.entry,
                       "budget_usd": account.budget_usd, "rate_per_min": account.rate_per_min})
        return mint_token(self._secret, trial_id)

    def _issue(self, trial_id: str, budget_usd: float | None, rate_per_min: float | None,
               entry: str | None) -> TrialAccount:
        self._revoked.discard(trial_id)
        account = self._accounts.setdefault(trial_id, TrialAccount(trial_id))
        account.budget_usd = budget_usd if budget_usd is not None else self._defaults[0]
        account.rate_per_min = rate_per_min if rate_per_min is not None else self._defaults[1]
        account.entry = entry if entry is not None else account.entry
        return account

    def revoke(self, trial_id: str) -> None:
        with self._lock:
            self._revoked.add(trial_id)
            self._log({"op": "revoke", "trial": trial_id})

    def authenticate(self, token: str) -> TrialAccount | None:
        """The account a valid, unrevoked token belongs to (created with the defaults if new)."""
        claims = self._verified.get(token)
        if claims is None:
            claims = token_claims(self._secret, token)
            if claims is None:
                return None
            if len(self._verified) >= VERIFIED_TOKENS_KEPT:
                self._verified.clear()
            self._verified[token] = claims
        trial_id, entry = claims
        with self._lock:
            if trial_id in self._revoked:
                return None
            account = self._accounts.get(trial_id)
            if account is None:
                account = self._accounts[trial_id] = TrialAccount(trial_id, entry, *self._defaults)
            elif account.entry is None and entry is not None:
                account.entry = entry  # e.g. an account replayed from the journal
            return account

    def admit(self, account: TrialAccount, now: float | None = None) -> Refusal | None:
        """Count the request against the rate window, or say why it is refused."""
        now = time.monotonic() if now is None else now
        with self._lock:
            budget = account.budget_usd
            if budget is not None and account.usage.cost_usd >= budget:
                return Refusal("budget_exceeded", f"trial {account.trial_id} spent "
                               f"${account.usage.cost_usd:.4f} of its ${budget:.4f} budget")
            while account.recent and now - account.recent[0] >= RATE_WINDOW_SECONDS:
                account.recent.popleft()
            rate = account.rate_per_min
            if rate is not None and len(account.recent) >= rate:
                wait = RATE_WINDOW_SECONDS - (now - account.recent[0])
                return Refusal("rate_limited", f"trial {account.trial_id} reached its limit of "
                               f"{rate:g} requests per minute", retry_after=max(wait, 0.0))
            account.recent.append(now)
        return None

    def record(self, account: TrialAccount, model: str, counts: TokenCounts | None, *,
               retries: int = 0, error: bool = False) -> float | None:
        """Add one request's outcome; returns its cost (None when the model is unpriced).

        With a journal, await :meth:`synced` before the response ends.
        """
        cost = self._cost(model, counts)
        with self._lock:
            self._add(account, model, counts, cost, retries, error)
            if self._journal is not None:
                self._log({"op": "use", "trial": account.trial_id, "model": model,
                           "counts": None if counts is None else asdict(counts), "cost": cost,
                           "retries": retries, "error": error})
        return cost

    @staticmethod
    def _add(account: TrialAccount, model: str, counts: TokenCounts | None, cost: float | None,
             retries: int, error: bool) -> None:
        per_model = account.usage.by_model.setdefault(model, Usage())
        for usage in (account.usage, per_model):
            usage.requests += 1
            usage.retries += retries
            usage.errors += int(error)
            if counts is not None:
                usage.add_tokens(counts, cost)
            if counts is not None and cost is None and model not in usage.unpriced_models:
                usage.unpriced_models.append(model)

    # ----- the journal: replay and compaction ----------------------------------------------------

    def _replay(self, journal: Journal) -> None:
        for number, record in enumerate(journal.read(), start=1):
            try:
                self._apply(record)
            except (KeyError, TypeError, ValueError) as exc:
                raise InfrastructureError(
                    f"gateway ledger {journal.path}: record {number} ({record.get('op')!r}) is malformed: {exc!r}",
                    hint="repair or remove that line by hand (or move the file aside to start an empty ledger)",
                ) from exc

    def _apply(self, record: dict[str, Any]) -> None:
        op, trial_id = record["op"], str(record["trial"])
        if op == "account":
            account = TrialAccount(trial_id, record.get("entry"), record.get("budget_usd"), record.get("rate_per_min"),
                                   Usage.from_dict(record["usage"]))
            self._accounts[trial_id] = account
            if record.get("revoked"):
                self._revoked.add(trial_id)
        elif op == "issue":
            self._issue(trial_id, record.get("budget_usd"), record.get("rate_per_min"), record.get("entry"))
        elif op == "use":
            account = self._accounts.get(trial_id) or self._accounts.setdefault(
                trial_id, TrialAccount(trial_id, None, *self._defaults))
            counts = None if record["counts"] is None else TokenCounts(**record["counts"])
            self._add(account, str(record["model"]), counts, record["cost"], int(record["retries"]),
                      bool(record["error"]))
        elif op == "revoke":
            self._revoked.add(trial_id)
        else:
            raise ValueError(f"unknown op {op!r} (this gateway knows account, issue, use, revoke)")

    def _compacted(self) -> list[dict[str, Any]]:
        """One ``account`` record per trial (exact floats: ``asdict``, not the rounded ``to_dict``)."""
        accounts = dict(self._accounts)
        for trial_id in self._revoked - accounts.keys():
            accounts[trial_id] = TrialAccount(trial_id, None, *self._defaults)
        return [{"op": "account", "trial": a.trial_id, "entry": a.entry, "budget_usd": a.budget_usd,
                 "rate_per_min": a.rate_per_min, "revoked": a.trial_id in self._revoked, "usage": asdict(a.usage)}
                for a in accounts.values()]

    def _cost(self, model: str, counts: TokenCounts | None) -> float | None:
        if counts is None or self._snapshot is None or not self._snapshot.is_priced(model):
            return None
        return cost_usd(counts, model, self._snapshot)

    def usage(self, trial_id: str) -> Usage:
        """A copy of the trial's usage (empty when the trial never made a request)."""
        with self._lock:
            account = self._accounts.get(trial_id)
            return copy.deepcopy(account.usage) if account else Usage()

    def trials(self) -> int:
        """How many trials the ledger has an account for."""
        with self._lock:
            return len(self._accounts)
