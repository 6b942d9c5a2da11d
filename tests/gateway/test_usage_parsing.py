"""Usage read from SSE streams does not depend on how the stream is cut into chunks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anchorage.costs import TokenCounts
from anchorage.gateway.mock import MockConfig, MockUpstream
from anchorage.gateway.usage import StreamUsage, counts_from_body

CHAT_STREAM = (
    b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
    b'data: {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 30, '
    b'"prompt_tokens_details": {"cached_tokens": 40}, "completion_tokens_details": {"reasoning_tokens": 20}}}\n\n'
    b"data: [DONE]\n\n"
)
RESPONSES_STREAM = (
    b'event: response.created\ndata: {"type": "response.created", "response": {"usage": null}}\n\n'
    b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": "usage"}\n\n'
    b'event: response.completed\ndata: {"type": "response.completed", "response": {"usage": '
    b'{"input_tokens": 100, "input_tokens_details": {"cached_tokens": 40}, "output_tokens": 30, '
    b'"output_tokens_details": {"reasoning_tokens": 20}}}}\r\n\r\n'
)
ANTHROPIC_STREAM = (
    b'event: message_start\ndata: {"type": "message_start", "message": {"usage": {"input_tokens": 60, '
    b'"cache_read_input_tokens": 40, "output_tokens": 1}}}\n\n'
    b'event: message_delta\ndata: {"type": "message_delta", "usage": {"output_tokens": 12}}\n\n'
    b'event: message_delta\ndata: {"type": "message_delta", "usage": {"output_tokens": 30}}\n\n'
)
EXPECTED = {
    "openai": TokenCounts(input_tokens=100, cached_input_tokens=40, output_tokens=30, reasoning_tokens=20),
    "anthropic": TokenCounts(input_tokens=100, cached_input_tokens=40, output_tokens=30),
}


def parse(stream: bytes, api: str, cuts: list[int]) -> TokenCounts | None:
    reader = StreamUsage(api=api)
    start = 0
    for cut in sorted({c % (len(stream) + 1) for c in cuts}):
        reader.feed(stream[start:cut])
        start = cut
    reader.feed(stream[start:])
    return reader.finish()


@given(cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30))
def test_any_chunking_gives_the_same_usage(cuts: list[int]) -> None:
    assert parse(CHAT_STREAM, "openai", cuts) == EXPECTED["openai"]
    assert parse(RESPONSES_STREAM, "openai", cuts) == EXPECTED["openai"]
    assert parse(ANTHROPIC_STREAM, "anthropic", cuts) == EXPECTED["anthropic"]


def test_stream_without_usage_reports_none() -> None:
    assert parse(b'data: {"choices": []}\n\ndata: [DONE]\n\n', "openai", []) is None


def test_last_event_without_blank_line_is_flushed() -> None:
    assert parse(CHAT_STREAM.replace(b"\n\ndata: [DONE]\n\n", b""), "openai", [7]) == EXPECTED["openai"]


@pytest.mark.parametrize("separately", [False, True])
def test_mock_usage_parses_back(separately: bool) -> None:
    mock = MockUpstream(MockConfig(reasoning_billed_separately=separately))
    answer = mock.answer({"model": "m", "reasoning_effort": "high", "messages": [{"content": "x" * 100}]})
    counts = counts_from_body({"usage": mock.chat_usage(answer)}, api="openai", reasoning_in_output=not separately)
    assert counts is not None
    assert counts.billed_output_tokens == answer.text_tokens + 1024
    assert json.dumps(mock.responses_usage(answer))
