"""``s3://bucket/prefix`` artifact store on boto3 (AWS, MinIO, any S3 endpoint; moto in tests).

Endpoint and credentials follow boto3's usual chain (``AWS_ENDPOINT_URL[_S3]``,
``AWS_ACCESS_KEY_ID``..., profiles, instance roles); an explicit endpoint switches to path-style
addressing, which S3-compatible servers expect. Integrity and retries:

* every object carries its SHA-256 in metadata (``x-amz-meta-sha256``), checked on download;
* botocore's ``standard`` retry mode retries 5xx, throttling and connection errors (bounded);
  on top of it a whole upload or download is retried a few times with backoff (a reset in the
  middle of a multipart upload, a checksum mismatch) before an :class:`InfrastructureError`;
* files above ``multipart_threshold`` go up in parts (boto3 ``TransferConfig``), and an upload is
  verified with a HEAD (size and checksum) before it counts as stored.

Botocore's own flexible checksums are set to ``when_required``: many S3-compatible servers reject
trailing checksums, and the SHA-256 above covers integrity end to end.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import boto3
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from anchorage.errors import InfrastructureError
from anchorage.store.base import ArtifactStore, check_key, join, sha256_bytes, sha256_file

T = TypeVar("T")
SHA_KEY = "sha256"
MISSING = frozenset({"404", "NoSuchKey", "NotFound"})


class ChecksumMismatch(InfrastructureError):
    """A downloaded or uploaded object does not match its recorded SHA-256."""


def _missing(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code")) in MISSING


class S3Store(ArtifactStore):
    """Objects under ``s3://bucket/prefix``."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 attempts: int = 3, botocore_attempts: int = 5, backoff_seconds: float = 0.2,
                 multipart_threshold: int = 8 * 1024 * 1024, multipart_chunksize: int = 8 * 1024 * 1024,
                 client: Any = None) -> None:
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.attempts, self.backoff_seconds = attempts, backoff_seconds
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        config = Config(
            retries={"mode": "standard", "max_attempts": botocore_attempts},
            connect_timeout=10, read_timeout=60,
            s3={"addressing_style": "path" if endpoint else "auto"},
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
        )
        self.client = client or boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
        self.transfer = TransferConfig(multipart_threshold=multipart_threshold,
                                       multipart_chunksize=multipart_chunksize, use_threads=False)

    def _key(self, key: str) -> str:
        return join(self.prefix, check_key(key))

    def _retrying(self, what: str, action: Callable[[], T]) -> T:
        """Run ``action`` up to ``attempts`` times; infrastructure failures become InfrastructureError."""
        for attempt in range(1, self.attempts + 1):
            try:
                return action()
            except ClientError as exc:
                if _missing(exc):
                    raise FileNotFoundError(f"{self.uri}: {what}: no such object") from exc
                failure: Exception = exc
            except (BotoCoreError, Boto3Error, ChecksumMismatch, OSError) as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                failure = exc
            if attempt == self.attempts:
                raise InfrastructureError(
                    f"{self.uri}: {what} failed after {attempt} attempts: {failure}",
                    hint="check the S3 endpoint, credentials and bucket (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID)",
                ) from failure
            time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    # ----- writes --------------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes, *, content_type: str | None = None) -> None:
        extra = {"ContentType": content_type} if content_type else {}
        digest = sha256_bytes(data)

        def put() -> None:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                   Metadata={SHA_KEY: digest}, **extra)
            self._verify_stored(key, len(data), digest)

        self._retrying(f"put {key}", put)

    def put_file(self, key: str, path: Path) -> None:
        digest, size = sha256_file(path), path.stat().st_size

        def upload() -> None:
            self.client.upload_file(str(path), self.bucket, self._key(key),
                                    ExtraArgs={"Metadata": {SHA_KEY: digest}}, Config=self.transfer)
            self._verify_stored(key, size, digest)

        self._retrying(f"upload {path} to {key}", upload)

    def _verify_stored(self, key: str, size: int, digest: str) -> None:
        head = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        stored = head.get("Metadata", {}).get(SHA_KEY)
        if head.get("ContentLength") != size or stored != digest:
            raise ChecksumMismatch(f"{self.uri_of(key)}: stored object has size {head.get('ContentLength')} "
                                   f"and sha256 {stored}, expected {size} and {digest}")

    # ----- reads ---------------------------------------------------------------------------------

    def get_bytes(self, key: str) -> bytes:
        def get() -> bytes:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            data: bytes = response["Body"].read()
            self._check(key, response.get("Metadata", {}).get(SHA_KEY), sha256_bytes(data))
            return data

        return self._retrying(f"get {key}", get)

    def get_tail(self, key: str, window: int) -> tuple[bytes, int]:
        """A ranged GET of the object's last ``window`` bytes (the whole object when smaller)."""
        def get() -> tuple[bytes, int]:
            if window <= 0:
                return b"", int(self.client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"])
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key), Range=f"bytes=-{window}")
            data: bytes = response["Body"].read()
            total = str(response.get("ContentRange") or "").rpartition("/")[2]
            return data, int(total) if total.isdigit() else len(data)

        return self._retrying(f"get the end of {key}", get)

    def get_file(self, key: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)

        def download() -> None:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            os.close(fd)
            try:
                self.client.download_file(self.bucket, self._key(key), tmp, Config=self.transfer)
                expected = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
                self._check(key, expected.get("Metadata", {}).get(SHA_KEY), sha256_file(Path(tmp)))
                os.replace(tmp, path)
            finally:
                Path(tmp).unlink(missing_ok=True)

        self._retrying(f"download {key}", download)

    def _check(self, key: str, expected: str | None, actual: str) -> None:
        if expected is not None and expected != actual:
            raise ChecksumMismatch(f"{self.uri_of(key)}: sha256 {actual} does not match the stored {expected}")

    def exists(self, key: str) -> bool:
        def head() -> bool:
            try:
                self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            except ClientError as exc:
                if _missing(exc):
                    return False
                raise
            return True

        return self._retrying(f"head {key}", head)

    def describe(self, key: str) -> dict[str, Any]:
        head = self._retrying(f"head {key}", lambda: self.client.head_object(Bucket=self.bucket,
                                                                             Key=self._key(key)))
        return {"size": head.get("ContentLength"), "sha256": head.get("Metadata", {}).get(SHA_KEY)}

    def list(self, prefix: str = "") -> list[str]:
        root = join(self.prefix, prefix)
        listing_prefix = root + "/" if root else ""

        def collect() -> list[str]:
            keys: list[str] = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                              Prefix=listing_prefix):
                keys += [item["Key"] for item in page.get("Contents", [])]
            return keys

        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted(k[strip:] for k in self._retrying(f"list {prefix or '/'}", collect))

    def delete(self, key: str) -> None:
        self._retrying(f"delete {key}", lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key)))
