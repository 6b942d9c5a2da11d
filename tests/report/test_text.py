"""The one text sanitiser (anchorage.text): invalid Unicode replaced, terminal control sequences removed whole (an
unterminated one never hides what follows), no raw control character left; JSON output lossless but printable;
every page escapes through it."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from anchorage.report.pages import esc
from anchorage.text import REPLACEMENT, clean, decode, deep_clean, json_text, readable

ESC = "\x1b"


def test_lone_surrogates_and_invalid_bytes_become_replacement_characters() -> None:
    text = json.loads('{"v": "79\\udcff and \\ud800"}')["v"]      # valid JSON, invalid Unicode
    assert clean(text) == f"79{REPLACEMENT} and {REPLACEMENT}"
    assert clean(text).encode("utf-8")                              # encodes: never a crash
    assert decode(b"ok \xff\xfe end") == f"ok {REPLACEMENT}{REPLACEMENT} end"
    assert deep_clean({"k\udcff": ["a\udcff", 1, None]}) == {f"k{REPLACEMENT}": [f"a{REPLACEMENT}", 1, None]}
    assert clean("\U0001f600 ü") == "\U0001f600 ü"                  # valid text is untouched


def test_terminal_sequences_are_removed_whole() -> None:
    hostile = (f"{ESC}]0;PWNED title{ESC}\\" f"{ESC}[2J{ESC}[H{ESC}[31mred{ESC}[0m "
               f"{ESC}]8;;http://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\ "
               f"{ESC}]52;c;Y2xpcGJvYXJk\x07 \x9b31m8-bit\x9b0m {ESC}P+q{ESC}\\ {ESC}(B {ESC}7")
    assert readable(hostile) == "red click  8-bit   "
    assert not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in readable(hostile))


def test_an_unterminated_sequence_hides_nothing() -> None:
    assert readable(f"before {ESC}]0;never terminated after") == "before 0;never terminated after"


def test_controls_become_visible_marks_and_lines_stay_lines() -> None:
    assert readable("a\x00b\x07c\x7fd") == f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}d"
    assert readable("tab\there\r\nline\rover") == "tab\there\nline\nover"   # \r cannot overwrite a line
    assert readable(None) == "" and readable(0.5) == "0.5"


def test_json_output_is_lossless_and_printable() -> None:
    value = {"ansi": f"{ESC}[2J", "c1": "\x9b", "ls": "\u2028", "bad": "x\udcff"}
    text = json_text(value, indent=1)
    assert ESC not in text and "\x9b" not in text and "\u2028" not in text
    back = json.loads(text)
    assert back["ansi"] == f"{ESC}[2J" and back["c1"] == "\x9b" and back["ls"] == "\u2028"   # the same strings
    assert back["bad"] == f"x{REPLACEMENT}"
    text.encode("utf-8")


def test_every_page_escape_goes_through_it() -> None:
    assert esc(f"<b>{ESC}[31m\udcff</b>") == f"&lt;b&gt;{REPLACEMENT}&lt;/b&gt;"


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())))
def test_any_text_comes_out_valid_and_free_of_controls(text: str) -> None:
    out = readable(text)
    out.encode("utf-8")
    assert not any((ord(c) < 32 and c not in "\t\n") or 0x7f <= ord(c) <= 0x9f for c in out)
    assert readable(out) == out                                     # idempotent
