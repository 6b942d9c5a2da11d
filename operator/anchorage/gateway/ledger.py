"""Per-trial accounts of the gateway: tokens, limits with reservations, usage (thread-safe; durable with a journal).

Used by the gateway's request handlers (authenticate, admit, record) and by the :class:`Gateway` handle
the engine holds (issue, usage, revoke) from another thread. Tokens (:mod:`anchorage.gateway.tokens`) are
HMAC-signed claims naming one trial (its entry, an expiry, transcript capture); the ledger checks the
signature once per token (then remembers it under a digest of the token, never comparing the token
itself) and, on every request, its expiry and whether the trial was revoked.

**Reservations.** :meth:`Ledger.admit` reserves a request's worst-case cost (the caller's estimate:
``max_tokens`` or the model's ceiling at the output price plus its input estimate at the uncached input
price) against the trial's budget, together with a slot of its rate limit; :meth:`Ledger.record` replaces
the reservation by the metered cost. A request is refused when the trial's spend, the reservations of
its requests in flight and its own reservation together pass the budget — so concurrent requests
cannot overshoot it; what can still pass it is the amount by which requests in flight cost more than
their reservation (the estimate's error: see docs/design-notes.md, "Gateway", for the bound).

**Unmetered requests.** A request the upstream answered without reporting its usage is recorded as
*unmetered* with what is known (the input estimate, the chunks seen, why): the trial's cost becomes
unknown (:attr:`anchorage.costs.Usage.known_cost_usd`), and the budget counts its reservation as spent.

Accounts live in memory; with a :class:`~anchorage.gateway.journal.Journal` (``ledger_dir``) every issue,
finished request and revocation is also journalled and replayed at start-up, so usage and revocations
survive a restart (reservations are not journalled: their requests ended with the process).
"""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from anchorage.costs import PriceSnapshot, Rate, TokenCounts, Usage
from anchorage.errors import InfrastructureError, InputError
from anchorage.gateway.journal import Journal
from anchorage.gateway.tokens import TokenClaims, mint_token, verify_token

RATE_WINDOW_SECONDS = 60.0
VERIFIED_TOKENS_KEPT = 4096  # tokens whose signature was checked, so a request skips the HMAC
RATES_KEPT = 1024  # models whose price was looked up


def _digest(token: str) -> bytes:
    """The key of a verified token in the cache (a lookup never compares the token itself)."""
    return hashlib.blake2b(token.encode("utf-8"), digest_size=16).digest()


@dataclass
class TrialAccount:
    """One trial's limits, usage, reservations in flight and recent request times."""

    trial_id: str
    entry: str | None = None
    budget_usd: float | None = None
    rate_per_min: float | None = None
    usage: Usage = field(default_factory=Usage)
    recent: deque[float] = field(default_factory=deque)
    reserved_usd: float = 0.0  # worst-case cost of the requests in flight
    in_flight: int = 0
    campaign: str | None = None  # the campaign label of the trial's tokens and cost

    @property
    def charged_usd(self) -> float:
        """What the budget counts as spent: metered cost plus the reservations of unmetered requests."""
        return self.usage.cost_usd + self.usage.unmetered_reserved_usd


@dataclass(frozen=True)
class Refusal:
    """Why a request was not forwarded (rate or budget), with a retry hint in seconds and the figures."""

    kind: str
    message: str
    retry_after: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unmetered:
    """A request answered without usage: why, and what is known of it."""

    why: str
    input_tokens: int = 0  # the gateway's estimate of its input
    chunks: int = 0  # stream chunks relayed before it ended
    reserved_usd: float = 0.0  # its reservation, which the budget counts as spent


class Ledger:
    """All trials' accounts behind one lock."""

    def __init__(self, secret: bytes, snapshot: PriceSnapshot | None, *,
                 default_budget_usd: float | None = None, default_rate_per_min: float | None = None,
                 journal: Journal | None = None, token_ttl_seconds: float | None = None) -> None:
        self._secret = secret
        self._snapshot = snapshot
        self._defaults = (default_budget_usd, default_rate_per_min)
        self._token_ttl = token_ttl_seconds
        self._lock = threading.Lock()
        self._accounts: dict[str, TrialAccount] = {}
        self._revoked: set[str] = set()
        self._verified: dict[bytes, TokenClaims] = {}  # digest of a token -> its claims (signature checked)
        self._rates: dict[str, Rate | None] = {}  # model -> its prices (None: unpriced)
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

    # ----- tokens ---------------------------------------------------------------------------------

    def issue(self, trial_id: str, *, budget_usd: float | None = None, rate_per_min: float | None = None,
              entry: str | None = None, expires_at: float | None = None, transcript: bool = False,
              campaign: str | None = None) -> str:
        """A token for ``trial_id`` with these limits (``entry``, ``campaign``: its metric labels). ``expires_at``
        (Unix seconds): when the token stops working; None: ``token_ttl_seconds`` from now (never, without one)."""
        if not trial_id:
            raise InputError("trial_id is empty", hint="pass the trial's name")
        if expires_at is None and self._token_ttl is not None:
            expires_at = time.time() + self._token_ttl
        with self._lock:
            account = self._issue(trial_id, budget_usd, rate_per_min, entry, campaign)
            self._log({"op": "issue", "trial": trial_id, "entry": account.entry, "campaign": account.campaign,
                       "budget_usd": account.budget_usd, "rate_per_min": account.rate_per_min})
        return mint_token(self._secret, trial_id, entry, expires_at=expires_at, transcript=transcript, campaign=campaign)

    def _issue(self, trial_id: str, budget_usd: float | None, rate_per_min: float | None,
               entry: str | None, campaign: str | None = None) -> TrialAccount:
        self._revoked.discard(trial_id)
        account = self._accounts.setdefault(trial_id, TrialAccount(trial_id))
        account.budget_usd = budget_usd if budget_usd is not None else self._defaults[0]
        account.rate_per_min = rate_per_min if rate_per_min is not None else self._defaults[1]
        account.entry = entry if entry is not None else account.entry
        account.campaign = campaign if campaign is not None else account.campaign
        return account

    def revoke(self, trial_id: str) -> None:
        with self._lock:
            self._revoked.add(trial_id)
            self._log({"op": "revoke", "trial": trial_id})

    def _claims(self, token: str) -> TokenClaims | None:
        key = _digest(token)
        claims = self._verified.get(key)
        if claims is None:
            claims = verify_token(self._secret, token)
            if claims is None:
                return None
            if len(self._verified) >= VERIFIED_TOKENS_KEPT:
                self._verified.clear()
            self._verified[key] = claims
        return claims

    def authenticate(self, token: str, now: float | None = None) -> tuple[TrialAccount, TokenClaims] | None:
        """The account (created with the defaults if new) and claims of a valid, unexpired, unrevoked token."""
        claims = self._claims(token)
        if claims is None or claims.expired(time.time() if now is None else now):
            return None
        with self._lock:
            if claims.trial_id in self._revoked:
                return None
            account = self._accounts.get(claims.trial_id)
            if account is None:
                account = self._accounts[claims.trial_id] = TrialAccount(claims.trial_id, claims.entry,
                                                                         *self._defaults, campaign=claims.campaign)
            else:
                if account.entry is None and claims.entry is not None:
                    account.entry = claims.entry  # e.g. an account replayed from the journal
                if account.campaign is None and claims.campaign is not None:
                    account.campaign = claims.campaign
            return account, claims

    def why_refused(self, token: str, now: float | None = None) -> str:
        """Why :meth:`authenticate` refuses ``token``, in words (for the 401 answer; slow path only)."""
        claims = self._claims(token) if token else None
        if claims is None:
            return "the token is missing, malformed or not signed by this gateway"
        if claims.expired(time.time() if now is None else now):
            assert claims.expires_at is not None
            when = datetime.fromtimestamp(claims.expires_at, UTC).isoformat(timespec="seconds")
            return f"the token of trial {claims.trial_id} expired at {when}"
        with self._lock:
            if claims.trial_id in self._revoked:
                return f"the token of trial {claims.trial_id} was revoked (the trial ended)"
        return "the token is valid"

    # ----- limits ---------------------------------------------------------------------------------

    def admit(self, account: TrialAccount, reserve_usd: float = 0.0, now: float | None = None) -> Refusal | None:
        """Reserve ``reserve_usd`` of the budget and a slot of the rate window, or say why not.

        Every admitted request must be settled by exactly one :meth:`record` with the same ``reserved_usd``.
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            budget = account.budget_usd
            if budget is not None and account.charged_usd + account.reserved_usd + reserve_usd > budget:
                return self._over_budget(account, budget, reserve_usd)
            while account.recent and now - account.recent[0] >= RATE_WINDOW_SECONDS:
                account.recent.popleft()
            rate = account.rate_per_min
            if rate is not None and len(account.recent) >= rate:
                wait = RATE_WINDOW_SECONDS - (now - account.recent[0])
                return Refusal("rate_limited", f"trial {account.trial_id} reached its limit of "
                               f"{rate:g} requests per minute", retry_after=max(wait, 0.0))
            account.recent.append(now)
            account.reserved_usd += reserve_usd
            account.in_flight += 1
        return None

    @staticmethod
    def _over_budget(account: TrialAccount, budget: float, reserve_usd: float) -> Refusal:
        spent, reserved = account.charged_usd, account.reserved_usd
        figures = {"budget_usd": round(budget, 9), "spent_usd": round(spent, 9), "reserved_usd": round(reserved, 9),
                   "in_flight": account.in_flight, "request_reserve_usd": round(reserve_usd, 9)}
        message = (f"trial {account.trial_id}: this request may cost up to ${reserve_usd:.6f}, which does not fit "
                   f"its ${budget:.6f} budget (spent ${spent:.6f}, reserved ${reserved:.6f} by "
                   f"{account.in_flight} request(s) in flight)")
        if account.in_flight:  # the reservations in flight may settle for less: worth a retry soon
            return Refusal("budget_exceeded", message + "; retry when they finished", 1.0, figures)
        hint = "; a smaller max_tokens (max_output_tokens) lowers what a request reserves" \
            if spent + reserve_usd > budget >= spent else ""
        return Refusal("budget_exceeded", message + hint, None, figures)

    def record(self, account: TrialAccount, model: str, counts: TokenCounts | None, *,
               retries: int = 0, error: bool = False, reserved_usd: float = 0.0,
               unmetered: Unmetered | None = None) -> float | None:
        """Settle one admitted request: release its reservation, add its outcome; returns its cost (None
        when the model is unpriced or nothing was metered).

        With a journal, await :meth:`synced` before the response ends.
        """
        cost = self._cost(model, counts)
        with self._lock:
            account.in_flight = max(account.in_flight - 1, 0)
            account.reserved_usd = account.reserved_usd - reserved_usd if account.in_flight else 0.0
            self._add(account, model, counts, cost, retries, error, unmetered)
            if self._journal is not None:
                record: dict[str, Any] = {"op": "use", "trial": account.trial_id, "model": model,
                                          "counts": None if counts is None else asdict(counts), "cost": cost,
                                          "retries": retries, "error": error}
                if unmetered is not None:
                    record["unmetered"] = asdict(unmetered)
                self._log(record)
        return cost

    @staticmethod
    def _add(account: TrialAccount, model: str, counts: TokenCounts | None, cost: float | None,
             retries: int, error: bool, unmetered: Unmetered | None = None) -> None:
        per_model = account.usage.by_model.setdefault(model, Usage())
        for usage in (account.usage, per_model):
            usage.requests += 1
            usage.retries += retries
            usage.errors += int(error)
            if counts is not None:
                usage.add_tokens(counts, cost)
            if counts is not None and cost is None and model not in usage.unpriced_models:
                usage.unpriced_models.append(model)
            if unmetered is not None:
                usage.unmetered_requests += 1
                usage.unmetered_input_tokens += unmetered.input_tokens
                usage.unmetered_reserved_usd += unmetered.reserved_usd

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
                                   Usage.from_dict(record["usage"]), campaign=record.get("campaign"))
            self._accounts[trial_id] = account
            if record.get("revoked"):
                self._revoked.add(trial_id)
        elif op == "issue":
            self._issue(trial_id, record.get("budget_usd"), record.get("rate_per_min"), record.get("entry"),
                        record.get("campaign"))
        elif op == "use":
            account = self._accounts.get(trial_id) or self._accounts.setdefault(
                trial_id, TrialAccount(trial_id, None, *self._defaults))
            counts = None if record["counts"] is None else TokenCounts(**record["counts"])
            unmetered = record.get("unmetered")
            self._add(account, str(record["model"]), counts, record["cost"], int(record["retries"]),
                      bool(record["error"]), None if unmetered is None else Unmetered(**unmetered))
        elif op == "revoke":
            self._revoked.add(trial_id)
        else:
            raise ValueError(f"unknown op {op!r} (this gateway knows account, issue, use, revoke)")

    def _compacted(self) -> list[dict[str, Any]]:
        """One ``account`` record per trial (exact floats: ``asdict``, not the rounded ``to_dict``)."""
        accounts = dict(self._accounts)
        for trial_id in self._revoked - accounts.keys():
            accounts[trial_id] = TrialAccount(trial_id, None, *self._defaults)
        return [{"op": "account", "trial": a.trial_id, "entry": a.entry, "campaign": a.campaign, "budget_usd": a.budget_usd,
                 "rate_per_min": a.rate_per_min, "revoked": a.trial_id in self._revoked, "usage": asdict(a.usage)}
                for a in accounts.values()]

    def rate(self, model: str) -> Rate | None:
        """``model``'s prices in the snapshot (None: unpriced, or no snapshot), read once per model."""
        try:
            return self._rates[model]
        except KeyError:
            pass
        snapshot = self._snapshot
        rate = Rate.of(model, snapshot) if snapshot is not None and snapshot.is_priced(model) else None
        if len(self._rates) < RATES_KEPT:  # model names come from requests: bounded
            self._rates[model] = rate
        return rate

    def _cost(self, model: str, counts: TokenCounts | None) -> float | None:
        rate = self.rate(model) if counts is not None else None
        return None if rate is None or counts is None else rate.cost(counts)

    def usage(self, trial_id: str) -> Usage:
        """A copy of the trial's usage (empty when the trial never made a request)."""
        with self._lock:
            account = self._accounts.get(trial_id)
            return copy.deepcopy(account.usage) if account else Usage()

    def trials(self) -> int:
        """How many trials the ledger has an account for."""
        with self._lock:
            return len(self._accounts)
