"""What an agent wrote, made safe to show a person: the one text sanitiser of the terminal, HTML and JSON output.

Everything that shows text an agent could have written — an artifact's values, gate messages quoting them,
log tails, transcripts, trial messages — goes through here before it reaches a person: the report and the
viewer (:func:`anchorage.report.pages.esc` calls :func:`readable` on every value it escapes), the CLI's
tables and messages (:func:`readable`, and :func:`json_text` for ``--json``), the exports (:func:`clean` on
every string written). Rules:

* **Never a crash on bad Unicode.** A lone surrogate (``"\\udcff"`` in a valid JSON artifact decodes to one)
  or bytes that are not UTF-8 become U+FFFD, the replacement character (:func:`clean`, :func:`decode`): a
  page, a report file or a terminal line always encodes.
* **No terminal control sequence is passed on.** ECMA-48 sequences — CSI (``ESC [ … final``: colours,
  clear screen, cursor moves), OSC/DCS/SOS/PM/APC strings terminated by BEL or ST (window titles,
  hyperlinks, clipboard writes) and the other two-byte ``ESC x`` sequences, in their 7-bit and 8-bit (C1)
  forms — are removed whole (:func:`readable`); an introducer left unterminated is removed alone, so an
  agent cannot hide the rest of its log behind one.
* **No raw control byte survives.** After that, every C0 control but tab and newline, DEL and every C1
  control becomes U+FFFD (a visible mark where the agent wrote one); ``\\r\\n`` and a lone ``\\r`` become a
  newline (a carriage return cannot overwrite the start of a line on a terminal).
* **JSON stays lossless where it can.** :func:`json_text` writes ``--json`` output: Python's encoder escapes
  C0 controls already; DEL and C1 controls are written as ``\\u`` escapes (the same string when read back);
  only lone surrogates are replaced (they cannot be encoded, and a strict JSON reader refuses them).

Standard library only; imported by ``anchorage.report``, ``anchorage.viewer``, ``anchorage.interop`` and
``anchorage.commands`` alike (it sits below all of them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
# ECMA-48: CSI (7-bit ESC [ or 8-bit 0x9b) parameter bytes, intermediate bytes, a final byte; the string
# sequences OSC/DCS/SOS/PM/APC up to their terminator (BEL or ST, 7- or 8-bit); other ESC sequences
# (ESC, intermediates, a final byte). Unterminated strings fall through to the last branch (introducer only).
_SEQUENCE = re.compile(
    "(?:\x1b\\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)"
    "|\x1b[\x20-\x2f]*[\x30-\x7e]"
)
_NEWLINES = re.compile("\r\n?")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_JSON_ESCAPE = re.compile("[\x7f-\x9f\u2028\u2029]")
_NEEDS_WORK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` as valid Unicode: every lone surrogate replaced by U+FFFD (nothing else changed)."""
    return _SURROGATE.sub(REPLACEMENT, text)


def decode(data: bytes) -> str:
    """Bytes an agent wrote as text: UTF-8, every invalid sequence replaced by U+FFFD."""
    return data.decode("utf-8", "replace")


def readable(text: Any) -> str:
    """``text`` (any value: ``str()`` of it) safe for a terminal and for an HTML page: valid Unicode, no control
    sequence, no control character but tab and newline (see the module docstring)."""
    value = text if isinstance(text, str) else ("" if text is None else str(text))
    if not _NEEDS_WORK.search(value):   # the common case: nothing to do, no copy
        return value
    value = _SEQUENCE.sub("", clean(value))
    value = _NEWLINES.sub("\n", value)
    return _CONTROL.sub(REPLACEMENT, value)


def deep_clean(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings, numbers) with every string — keys too — :func:`clean`-ed."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {deep_clean(k): deep_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [deep_clean(v) for v in value]
    return value


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` that is safe to print and to write as UTF-8:
    lone surrogates replaced, DEL, C1 controls and the JavaScript line separators written as ``\\u`` escapes."""
    text = json.dumps(value, ensure_ascii=False, **options)
    text = clean(text)
    return _JSON_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
