"""Cleaning of a solver's output before any verifier sees it (seed 002, step 3: context isolation).

A verifier that reads the solver's trace is biased towards agreeing with it, so the panel
(:mod:`anchorage.verify.panel`) only ever shows verifiers a :class:`CleanedSolution`:

* thinking blocks are removed (``<think>…</think>``, ``<thinking>``, ``<reasoning>``, ``<scratchpad>``,
  fenced ```` ```thinking ```` blocks; an unclosed opening tag swallows everything up to the first
  section heading; a closing tag without an opening one — the chat template opened the block —
  removes everything before it);
* only the **Method**, **Proof** / **Detailed Solution** and **Answer** sections are kept (the solver's
  Verdict, Rounds and Self-verification notes are dropped: they describe the process, not the proof);
* inside the kept sections, exploratory prose is removed: a paragraph holding an abandonment marker
  ("this doesn't work", "scrap that", "start over", …) is a false start and goes entirely; any other
  sentence opening with an exploratory phrase ("Let me try", "Actually wait", "Hmm", "Wait,", "Oops",
  "On second thought", …) goes alone. Display math and ``[GAP: …]`` markers are never touched.

Output without any section heading is kept whole as the proof (after the same stripping), and the
record says so. :func:`clean_solution` is the only way to build a :class:`CleanedSolution`; the prompt
builders accept nothing else for the solution slot.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

_THINK_TAGS = ("think", "thinking", "reasoning", "scratchpad", "analysis")
_TAGS = "|".join(_THINK_TAGS)
_CLOSED_BLOCK = re.compile(rf"<(?P<tag>{_TAGS})\b[^>]*>.*?</(?P=tag)\s*>", re.DOTALL | re.IGNORECASE)
_FENCED_THINKING = re.compile(r"```(?:thinking|think|scratch|scratchpad)\b.*?```", re.DOTALL | re.IGNORECASE)
_OPEN_TAG = re.compile(rf"<(?:{_TAGS})\b[^>]*>", re.IGNORECASE)
_STRAY_CLOSE = re.compile(rf"</(?:{_TAGS})\s*>", re.IGNORECASE)

# Section headings: "**Method**:", "## Proof", "Answer:", "**Detailed Solution**" ...
_SECTION_NAMES = {
    "method": "method", "approach": "method", "key idea": "method",
    "proof": "proof", "detailed solution": "proof", "solution": "proof", "full proof": "proof",
    "answer": "answer", "final answer": "answer",
    "verdict": "drop", "rounds": "drop", "self-verification notes": "drop", "self-verification": "drop",
    "notes": "drop", "scratch work": "drop", "thoughts": "drop",
}
_NAMES = "|".join(sorted((re.escape(n) for n in _SECTION_NAMES), key=len, reverse=True))
# A heading is a markdown heading, a bold/underlined name, or a plain name followed by a colon.
_HEADING = re.compile(
    r"^[ \t]*(?:"
    rf"#{{1,6}}[ \t]*(?:\*\*|__)?(?P<h>{_NAMES})[.:：]?(?:\*\*|__)?[ \t]*[.:：]?"
    rf"|(?:\*\*|__)(?P<b>{_NAMES})[ \t]*(?:[.:：][ \t]*(?:\*\*|__)|(?:\*\*|__)[ \t]*[.:：]?)"
    rf"|(?P<p>{_NAMES})[ \t]*[:：]"
    r")[ \t]*(?P<rest>.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def _heading_name(match: re.Match[str]) -> str:
    return (match.group("h") or match.group("b") or match.group("p")).lower()


_EXPLORATORY_OPENERS = re.compile(
    r"^\s*(?:[*_>\-]\s*)*(?:let me (?:try|think|see|check|reconsider|re-?examine|double[- ]check|start|verify)|let's try|"
    r"actually,? wait|actually,? no|wait[,.!]|wait\b|hmm+|hm+[,.]|oops|uh+[,.]|ah+[,.]|oh[,.!]|on second thought|"
    r"scratch that|hold on|i think|i guess|i wonder|maybe i|perhaps i|let me|okay,? so|ok,? so|so,? um)",
    re.IGNORECASE,
)
_ABANDONMENT = re.compile(
    r"(?:this|that|it) (?:doesn't|does not|won't|will not|didn't|did not) work|(?:this|that) (?:approach|attempt|idea) "
    r"(?:fails|failed|is wrong|is a dead end)|dead end|scrap (?:that|this)|scratch that|start over|back to the drawing board|"
    r"let me start again|never ?mind|that was wrong|this is wrong",
    re.IGNORECASE,
)
_SEGMENT = re.compile(r"((?<=[.!?])[ \t]+(?=\S)|[ \t]*\n[ \t]*)")
_DISPLAY_MATH = re.compile(r"^\s*(?:\$\$|\\\[|\\begin\{)")
GAP_MARKER = re.compile(r"\[GAP:\s*(?P<text>[^\]]*)\]")


@dataclass(frozen=True)
class Removed:
    """One piece of text the cleaning dropped, and why (kept for the audit trail, never shown to verifiers)."""

    reason: str
    text: str


@dataclass(frozen=True)
class CleanedSolution:
    """Method + proof + answer of one solution, stripped of everything about how it was found."""

    method: str
    proof: str
    answer: str
    sectioned: bool
    removed: tuple[Removed, ...] = field(default=(), compare=False, repr=False)
    _token: object = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self._token is not _BUILDER:
            raise TypeError("build a CleanedSolution with anchorage.verify.cleaning.clean_solution()")

    @property
    def text(self) -> str:
        """The solution as verifiers and revisers see it."""
        parts = [("Method", self.method), ("Proof", self.proof), ("Answer", self.answer)]
        return "\n\n".join(f"**{name}**:\n{body}" for name, body in parts if body)

    @property
    def digest(self) -> str:
        """12 hex digits of SHA-256 of :attr:`text`: names this exact solution in records and prompts."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:12]

    @property
    def gaps(self) -> list[str]:
        """The inline ``[GAP: …]`` markers a reviser left in the proof."""
        return [m.group("text").strip() for m in GAP_MARKER.finditer(self.text)]

    @property
    def empty(self) -> bool:
        return not (self.proof or self.answer)

    def summary(self) -> dict[str, object]:
        return {"digest": self.digest, "sectioned": self.sectioned, "chars": len(self.text),
                "removed": [{"reason": r.reason, "chars": len(r.text)} for r in self.removed], "gaps": self.gaps}


_BUILDER = object()


def strip_thinking(text: str) -> tuple[str, list[Removed]]:
    """Remove thinking blocks; an unclosed opening tag removes text up to the next section heading."""
    removed: list[Removed] = []

    def drop(match: re.Match[str]) -> str:
        removed.append(Removed("thinking block", match.group(0)))
        return "\n"

    text = _FENCED_THINKING.sub(drop, _CLOSED_BLOCK.sub(drop, text))
    orphan = _STRAY_CLOSE.search(text)
    if orphan is not None and not _OPEN_TAG.search(text, 0, orphan.start()):
        # a closing tag without its opening one: the template opened the block (e.g. "<think>" in the
        # prompt), so everything before the tag is thinking
        removed.append(Removed("thinking before an orphan closing tag", text[:orphan.end()]))
        text = text[orphan.end():]
    while (opening := _OPEN_TAG.search(text)) is not None:
        heading = _HEADING.search(text, opening.end())
        end = heading.start() if heading else len(text)
        removed.append(Removed("unclosed thinking block", text[opening.start():end]))
        text = text[:opening.start()] + "\n" + text[end:]
    return _STRAY_CLOSE.sub("", text), removed


def split_sections(text: str) -> dict[str, str] | None:
    """Section name (method/proof/answer/drop) → body; None when the text has no known heading."""
    headings = list(_HEADING.finditer(text))
    if not headings:
        return None
    sections: dict[str, list[str]] = {}
    for index, heading in enumerate(headings):
        end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
        kind = _SECTION_NAMES[_heading_name(heading)]
        body = (heading.group("rest") + text[heading.end():end]).strip()
        sections.setdefault(kind, []).append(body)
    return {kind: "\n\n".join(b for b in bodies if b) for kind, bodies in sections.items()}


def _display_after(line: str, in_display: bool) -> bool:
    """Whether a display-math block is still open after ``line``."""
    if line.count("$$") % 2 == 1:
        return not in_display
    if in_display:
        return not re.search(r"\\\]|\\end\{", line)
    opens = line.strip().startswith(("\\[", "\\begin{"))
    return opens and not re.search(r"\\\]\s*$|\\end\{[^}]*\}\s*$", line)


def _chunks(paragraph: str) -> list[tuple[bool, str]]:
    """(is_math, text) runs of a paragraph: display-math lines apart from prose lines."""
    runs: list[tuple[bool, list[str]]] = []
    in_display = False
    for line in paragraph.split("\n"):
        is_math = in_display or bool(_DISPLAY_MATH.match(line))
        in_display = _display_after(line, in_display)
        if runs and runs[-1][0] == is_math:
            runs[-1][1].append(line)
        else:
            runs.append((is_math, [line]))
    return [(is_math, "\n".join(lines)) for is_math, lines in runs]


def _clean_prose(prose: str, removed: list[Removed]) -> str:
    """Drop exploratory sentences; a sentence ends at ``.``/``!``/``?`` + space or at a line break."""
    pieces = _SEGMENT.split(prose)      # [text, separator, text, separator, ..., text]
    kept: list[str] = []
    for index in range(0, len(pieces), 2):
        sentence, separator = pieces[index], pieces[index + 1] if index + 1 < len(pieces) else ""
        if _EXPLORATORY_OPENERS.match(sentence) and not GAP_MARKER.search(sentence):
            removed.append(Removed("exploratory prose", sentence))
        else:
            kept.append(sentence + separator)
    return "".join(kept).strip()


def _clean_paragraph(paragraph: str, removed: list[Removed]) -> str:
    if not paragraph.strip():
        return paragraph
    prose_only = "\n".join(text for is_math, text in _chunks(paragraph) if not is_math)
    if _ABANDONMENT.search(GAP_MARKER.sub("", prose_only)):
        removed.append(Removed("false start", paragraph))
        return ""
    parts = [text if is_math else _clean_prose(text, removed) for is_math, text in _chunks(paragraph)]
    return "\n".join(p for p in parts if p.strip())


def strip_exploration(text: str) -> tuple[str, list[Removed]]:
    """Drop false-start paragraphs and exploratory sentences; keep math and GAP markers."""
    removed: list[Removed] = []
    paragraphs = re.split(r"\n[ \t]*\n", text)
    cleaned = [_clean_paragraph(p, removed) for p in paragraphs]
    return "\n\n".join(p.strip("\n") for p in cleaned if p.strip()), removed


def clean_solution(raw: str) -> CleanedSolution:
    """The verifier-facing view of a solver's (or reviser's) raw output."""
    text, removed = strip_thinking(raw.replace("\r\n", "\n"))
    sections = split_sections(text)
    if sections is None:
        proof, more = strip_exploration(text.strip())
        return CleanedSolution("", proof, "", False, tuple(removed + more), _BUILDER)
    if sections.get("drop"):
        removed.append(Removed("process section (verdict/rounds/self-verification)", sections["drop"]))
    kept: dict[str, str] = {}
    for kind in ("method", "proof", "answer"):
        kept[kind], more = strip_exploration(sections.get(kind, ""))
        removed.extend(more)
    return CleanedSolution(kept["method"], kept["proof"], kept["answer"], True, tuple(removed), _BUILDER)
