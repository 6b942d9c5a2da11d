"""Parse a verifier's reply into a :class:`Verdict` (seed 002, step 4 return format).

The expected reply is::

    **Verdict**: HOLDS | HOLE FOUND | UNCLEAR
    **If HOLE FOUND**:
    - Location: [quote the problematic step]
    - Pattern: [which check fired, or "other"]
    - Why it breaks: [specific]
    - Fixable?: [yes with X / no, fundamental]

Models vary the formatting (markdown headings, bold, backticks, ``Hole-found``, a bare verdict on the
first line, fields as ``**Location:**`` or ``Location -``), so the parser is lenient about *form* and
strict about *meaning*: a reply naming two different verdicts on its verdict line (an echoed template),
or none at all, is ``UNCLEAR`` with the reason recorded — it never counts as a vote either way.
Used by :mod:`anchorage.verify.panel`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import StrEnum


class Kind(StrEnum):
    HOLDS = "HOLDS"
    HOLE_FOUND = "HOLE FOUND"
    UNCLEAR = "UNCLEAR"


_TOKEN = r"hole[\s_-]*found|holds|unclear"
_VERDICT_LINE = re.compile(
    r"^[ \t>*_#`-]*verdict[ \t*_`]*[:：=\-–—]?[ \t*_`]*(?P<line>[^\n]*)(?:\n(?:[ \t]*\n)*[ \t*_`>]*(?P<next>[^\n]*))?",
    re.IGNORECASE | re.MULTILINE,
)
_TOKENS = re.compile(_TOKEN, re.IGNORECASE)
_BARE_FIRST_LINE = re.compile(rf"^[\s>*_#`-]*(?P<tok>{_TOKEN})\b", re.IGNORECASE)
_FIELD_NAMES = {
    "location": "location", "where": "location",
    "pattern": "pattern", "check": "pattern",
    "why it breaks": "why", "why": "why", "reason": "why",
    "fixable?": "fixable", "fixable": "fixable",
}
_NAME = r"why it breaks|fixable\??|location|pattern|where|why|reason|check"
_SEP = r"(?:[ \t*_`]*[:：\-–—]|(?<=\?))"
_FIELD = re.compile(
    rf"^[ \t>*_`-]*(?P<name>{_NAME}){_SEP}[ \t*_`]*(?P<value>.*?)(?=^[ \t>*_`-]*(?:{_NAME}){_SEP}|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Verdict:
    """One verifier's vote: HOLDS, HOLE FOUND (with its hole report) or UNCLEAR (with the reason)."""

    kind: Kind
    location: str = ""
    pattern: str = ""
    why: str = ""
    fixable: bool | None = None
    fixable_detail: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        record = asdict(self)
        record["kind"] = str(self.kind)
        return record

    def hole_report(self) -> str:
        """The hole as a reviser receives it (seed 002, step 6)."""
        fix = {True: "yes", False: "no, fundamental", None: "unknown"}[self.fixable]
        detail = f" ({self.fixable_detail})" if self.fixable_detail else ""
        return (f"- Location: {self.location or '(not quoted)'}\n- Pattern: {self.pattern or 'other'}\n"
                f"- Why it breaks: {self.why or '(not given)'}\n- Fixable?: {fix}{detail}")


def _kind(token: str) -> Kind:
    token = re.sub(r"[\s_-]+", " ", token.strip().upper())
    return Kind.HOLE_FOUND if token == "HOLE FOUND" else Kind(token)


def _tokens_in(text: str) -> set[Kind]:
    return {_kind(m.group(0)) for m in _TOKENS.finditer(text)}


def _verdict_kind(reply: str) -> tuple[Kind | None, str]:
    """The verdict named by the reply, or None with the reason it could not be read."""
    for match in _VERDICT_LINE.finditer(reply):
        found = _tokens_in(match.group("line")) or _tokens_in(match.group("next") or "")
        if len(found) == 1:
            return found.pop(), ""
        if len(found) > 1:
            return None, f"the verdict line names several verdicts ({', '.join(sorted(found))}): an echoed template?"
    bare = _BARE_FIRST_LINE.match(reply)
    if bare:
        return _kind(bare.group("tok")), ""
    return None, "no 'Verdict: HOLDS | HOLE FOUND | UNCLEAR' line in the reply"


def _fields(reply: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(reply):
        key = _FIELD_NAMES[match.group("name").lower()]
        value = re.sub(r"\s+", " ", match.group("value")).strip(" *_`[]")
        fields.setdefault(key, value)
    return fields


def _fixable(value: str) -> tuple[bool | None, str]:
    lowered = value.lower()
    if re.match(r"^\W*(no|not|unfixable|fundamental)\b", lowered) or "fundamental" in lowered:
        return False, value
    if re.match(r"^\W*(yes|fixable|probably|likely)\b", lowered):
        return True, value
    return None, value


def parse_verdict(reply: str) -> Verdict:
    """Read one verifier reply; unreadable replies become UNCLEAR with the reason."""
    if not reply.strip():
        return Verdict(Kind.UNCLEAR, reason="empty reply")
    kind, reason = _verdict_kind(reply)
    if kind is None:
        return Verdict(Kind.UNCLEAR, reason=reason)
    if kind is not Kind.HOLE_FOUND:
        return Verdict(kind, reason="verifier answered UNCLEAR" if kind is Kind.UNCLEAR else "")
    fields = _fields(reply)
    fixable, detail = _fixable(fields.get("fixable", ""))
    missing = [name for name in ("location", "why") if not fields.get(name)]
    return Verdict(Kind.HOLE_FOUND, location=fields.get("location", ""), pattern=fields.get("pattern", "other"),
                   why=fields.get("why", ""), fixable=fixable, fixable_detail=detail,
                   reason=f"hole report lacks {', '.join(missing)}" if missing else "")
