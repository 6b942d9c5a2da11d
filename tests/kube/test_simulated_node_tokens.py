"""The node agent's ServiceAccount token requests for a pod it was just given: the API server checks the token's
bound pod in its cache, which may not hold the pod yet — "not found" (404), or "scheduled on a different node"
(403) — for a moment after the node saw the binding; the agent asks again instead of failing the pod (a pod of the
real-cluster tests failed with NodeAgentError this way). Another refusal fails at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from anchorage_devcluster.simulatednode import Api, ApiError, _ApiReferences

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": {"serviceAccountName": "runner"}}


class _Answers(Api):
    """An API that answers the token requests with the given errors first, then a token."""

    def __init__(self, errors: list[ApiError]) -> None:
        self.errors, self.calls = errors, 0

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                   params: dict[str, str] | None = None) -> dict[str, Any]:
        self.calls += 1
        assert (method, path) == ("POST", "/api/v1/namespaces/ns/serviceaccounts/runner/token")
        assert body["spec"]["boundObjectRef"] == {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1"}
        if self.errors:
            raise self.errors.pop(0)
        return {"status": {"token": "minted"}}


@pytest.mark.parametrize("status", [403, 404])
def test_a_lagging_cache_is_waited_out(status: int) -> None:
    api = _Answers([ApiError(status, 'pods "p" not found'), ApiError(status, 'pods "p" not found')])
    assert asyncio.run(_ApiReferences(api).token(POD, "anchorage", 600)) == "minted"
    assert api.calls == 3


def test_other_refusals_fail_at_once() -> None:
    api = _Answers([ApiError(422, "invalid")])
    with pytest.raises(ApiError, match="422"):
        asyncio.run(_ApiReferences(api).token(POD, None, 600))
    assert api.calls == 1


def test_a_cache_that_never_catches_up_fails_in_the_end() -> None:
    api = _Answers([ApiError(404, "not found") for _ in range(10)])
    with pytest.raises(ApiError, match="404"):
        asyncio.run(_ApiReferences(api).token(POD, None, 600))
    assert api.calls == 6
