"""What an S3 store meets on a real server (versitygw, behind the fault proxy), and on moto where moto can show it:
create-once writes, checksums the server checks, multipart uploads, listings past 1,000 keys, credentials from the
environment and from a profile."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from faults import Fault, FaultProxy
from servers import Backend, new_bucket

from anchorage.errors import InfrastructureError, InputError
from anchorage.store import ArtifactStore, open_store
from anchorage.store.base import AlreadyStored

MB = 1024 * 1024


def test_an_exclusive_write_creates_once(any_store: ArtifactStore) -> None:
    any_store.put_bytes("c/t/trial.json", b'{"phase": "Succeeded"}', exclusive=True)
    any_store.put_bytes("c/t/trial.json", b'{"phase": "Succeeded"}', exclusive=True)  # the same bytes again: fine
    with pytest.raises(AlreadyStored, match="already exists with other content"):
        any_store.put_bytes("c/t/trial.json", b'{"phase": "Failed"}', exclusive=True)
    assert any_store.get_bytes("c/t/trial.json") == b'{"phase": "Succeeded"}'
    any_store.put_bytes("c/t/trial.json", b'{"phase": "Failed"}')  # a plain write still replaces
    assert any_store.get_bytes("c/t/trial.json") == b'{"phase": "Failed"}'


def test_of_racing_exclusive_writers_exactly_one_wins(any_store: ArtifactStore) -> None:
    """Eight writers store different records under one key at the same moment: one stores, seven are refused, and
    the object is the winner's."""
    start, outcomes, lock = threading.Barrier(8), {}, threading.Lock()

    def write(i: int) -> None:
        start.wait()
        try:
            any_store.put_bytes("c/t/trial.json", f'{{"writer": {i}}}'.encode(), exclusive=True)
            result = "stored"
        except AlreadyStored:
            result = "refused"
        with lock:
            outcomes[i] = result

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    winners = [i for i, result in outcomes.items() if result == "stored"]
    assert len(winners) == 1 and list(outcomes.values()).count("refused") == 7
    assert any_store.get_bytes("c/t/trial.json") == f'{{"writer": {winners[0]}}}'.encode()


def test_an_exclusive_write_whose_answer_was_lost_is_not_a_conflict(s3_store: Callable[..., ArtifactStore],
                                                                     fault_proxy: FaultProxy) -> None:
    """The server stores the record, the connection drops before the answer: botocore sends the PUT again, the
    server answers 412 (the key is taken), and the store finds its own bytes there."""
    store = s3_store()
    fault_proxy.add(Fault("lose_answer", method="PUT", header="If-None-Match"))
    store.put_bytes("c/t/trial.json", b"{}", exclusive=True)
    assert fault_proxy.injected and store.get_bytes("c/t/trial.json") == b"{}"
    assert sum(1 for line in fault_proxy.seen if line.startswith("PUT")) == 2


def test_a_server_without_conditional_writes_gets_head_then_put(s3_store: Callable[..., ArtifactStore],
                                                                fault_proxy: FaultProxy,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """A server that answers If-None-Match with 501 NotImplemented (the proxy plays one): the store says so once and
    checks with a HEAD before a plain PUT, so an existing record is still never replaced."""
    store = s3_store()
    fault_proxy.add(Fault("status", method="PUT", header="If-None-Match", status=501, code="NotImplemented",
                          times=100))
    with caplog.at_level(logging.WARNING, logger="anchorage.store.s3"):
        store.put_bytes("c/t/trial.json", b"first", exclusive=True)
        with pytest.raises(AlreadyStored):
            store.put_bytes("c/t/trial.json", b"second", exclusive=True)
    assert store.get_bytes("c/t/trial.json") == b"first"
    assert len(fault_proxy.injected) == 1  # after the first 501, no conditional PUT is sent
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "does not support If-None-Match" in caplog.records[0].message


def test_a_body_changed_on_the_way_is_refused_by_the_server_and_sent_again(
        real_s3: Backend, tmp_path: Path) -> None:
    """The store sends each object's SHA-256 (``x-amz-checksum-sha256``; each part's for multipart uploads); the
    proxy flips a byte of a body on its way, the server refuses it (``BadDigest``) and the store sends it again.
    (Real server only: moto stores whatever body it gets, whatever checksum came with it.)"""
    proxy = FaultProxy(real_s3.endpoint)
    try:
        store = open_store(f"s3://{new_bucket(real_s3)}/runs", endpoint_url=proxy.url, backoff_seconds=0.01,
                           multipart_threshold=5 * MB, multipart_chunksize=5 * MB)
        proxy.add(Fault("corrupt_request", method="PUT"))
        store.put_bytes("c/t/result.json", b'{"value": 42}')
        assert store.get_bytes("c/t/result.json") == b'{"value": 42}'
        source = tmp_path / "big.bin"
        source.write_bytes(os.urandom(11 * MB))
        proxy.add(Fault("corrupt_request", method="PUT", query_has="partNumber=2"))
        store.put_file("c/t/artifacts/big.bin", source)
        assert len(proxy.injected) == 2
        back = tmp_path / "back.bin"
        store.get_file("c/t/artifacts/big.bin", back)
        assert back.read_bytes() == source.read_bytes()
        # each corrupted body was sent twice: refused once, stored the second time
        assert sum(1 for line in proxy.seen if line.startswith("PUT") and "partNumber=2" in line) == 2
        client = real_s3.client()
        wrong = base64.b64encode(hashlib.sha256(b"something else").digest()).decode()
        with pytest.raises(client.exceptions.ClientError, match=r"BadDigest|XAmzContentChecksumMismatch|Checksum"):
            client.put_object(Bucket=store.bucket, Key="runs/x", Body=b"payload",  # type: ignore[attr-defined]
                              ChecksumSHA256=wrong)
    finally:
        proxy.stop()


def test_files_over_the_part_size_go_up_in_parts(s3_store: Callable[..., ArtifactStore], fault_proxy: FaultProxy,
                                                 tmp_path: Path) -> None:
    store = s3_store(multipart_threshold=5 * MB, multipart_chunksize=5 * MB)
    small, big = tmp_path / "small.bin", tmp_path / "big.bin"
    small.write_bytes(os.urandom(MB))
    big.write_bytes(os.urandom(12 * MB))
    store.put_file("c/t/small.bin", small)
    assert not any("uploads" in line for line in fault_proxy.seen)
    store.put_file("c/t/big.bin", big)
    parts = [line for line in fault_proxy.seen if line.startswith("PUT") and "partNumber=" in line]
    assert len(parts) == 3 and any(line.startswith("POST") and "uploads" in line for line in fault_proxy.seen)
    assert store.describe("c/t/big.bin") == {"size": 12 * MB, "sha256": hashlib.sha256(big.read_bytes()).hexdigest()}


def test_a_listing_past_a_thousand_keys_is_paged(s3_store: Callable[..., ArtifactStore], fault_proxy: FaultProxy,
                                                 s3_backend: Backend, bucket: str) -> None:
    client = s3_backend.client()
    keys = [f"runs/c/t{i:04d}/trial.json" for i in range(1050)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=b"{}"), keys))
    store = s3_store()
    assert store.list("c") == [key.removeprefix("runs/") for key in keys]
    pages = [line for line in fault_proxy.seen if line.startswith("GET") and "list-type=2" in line]
    assert len(pages) == 2 and "continuation-token" in pages[1]
    assert len(store.completed_prefixes("c")) == 0


def test_credentials_from_the_environment_and_wrong_ones_fail_at_once(real_s3: Backend, bucket_on_real: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's chain reads AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; a wrong secret is refused by the server (it
    checks signatures: moto does not) and the store says how to fix it without retrying."""
    proxy = FaultProxy(real_s3.endpoint)
    try:
        open_store(f"s3://{bucket_on_real}/runs", endpoint_url=proxy.url).put_bytes("a.txt", b"a")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        store = open_store(f"s3://{bucket_on_real}/runs", endpoint_url=proxy.url)
        before = len(proxy.seen)
        with pytest.raises(InfrastructureError, match="refused") as failure:
            store.get_bytes("a.txt")
        assert "AWS_SECRET_ACCESS_KEY" in (failure.value.hint or "")
        assert len(proxy.seen) - before == 1  # no retry can cure a wrong key
    finally:
        proxy.stop()


def test_credentials_from_a_profile(real_s3: Backend, bucket_on_real: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_PROFILE names a profile of the shared credentials file (and of the config file, with the endpoint), as a
    user's ``~/.aws`` would: no AWS_ACCESS_KEY_ID in the environment."""
    (tmp_path / "credentials").write_text(f"[anchorage-test]\naws_access_key_id = {real_s3.access_key}\n"
                                          f"aws_secret_access_key = {real_s3.secret_key}\n")
    (tmp_path / "config").write_text(f"[profile anchorage-test]\nregion = us-east-1\n"
                                     f"endpoint_url = {real_s3.endpoint}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "anchorage-test")
    store = open_store(f"s3://{bucket_on_real}/runs", endpoint_url=real_s3.endpoint)
    store.put_bytes("c/t/trial.json", b"{}")
    assert store.list("c") == ["c/t/trial.json"]
    monkeypatch.setenv("AWS_PROFILE", "missing-profile")
    with pytest.raises(InputError, match="profile 'missing-profile'") as failure:
        open_store(f"s3://{bucket_on_real}/runs")
    assert "AWS_CONFIG_FILE" in (failure.value.hint or "")


def test_credentials_from_a_web_identity_token_file(moto_endpoint: str, s3_credentials: None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE (a pod's projected ServiceAccount token): boto3's chain calls
    AssumeRoleWithWebIdentity and the store signs every request with the session credentials it got. On moto's STS:
    versitygw's STS fetches an issuer's JWKS only over https, port 443, from an address that is neither loopback nor
    private (its SSRF guard), so no test on loopback can reach it (docs/design-notes.md, "Store")."""
    server = Backend("moto", moto_endpoint, "testing", "testing")
    bucket = new_bucket(server)
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YSJ9.c2ln")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/anchorage-trials")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto_endpoint)
    proxy = FaultProxy(moto_endpoint)
    try:
        store = open_store(f"s3://{bucket}/runs", endpoint_url=proxy.url)
        store.put_bytes("c/t/trial.json", b"{}")
        assert store.get_bytes("c/t/trial.json") == b"{}"
        keys = {re.search(r"Credential=([^/]+)/", h["Authorization"]).group(1) for h in proxy.headers}  # type: ignore[union-attr]
        tokens = {h.get("X-Amz-Security-Token") for h in proxy.headers}
    finally:
        proxy.stop()
    assert len(keys) == 1 and keys.pop().startswith("ASIA")  # temporary credentials, not the environment's
    assert len(tokens) == 1 and None not in tokens


@pytest.fixture
def bucket_on_real(real_s3: Backend) -> str:
    return new_bucket(real_s3)
