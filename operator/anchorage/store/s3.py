"""``s3://bucket/prefix`` artifact store on boto3 (AWS, versitygw, SeaweedFS, any S3 endpoint).

Endpoint and credentials follow boto3's usual chain (``AWS_ENDPOINT_URL[_S3]``, ``AWS_ACCESS_KEY_ID``...,
``AWS_PROFILE`` and its shared files, a web identity token file with ``AWS_ROLE_ARN``, instance roles); an
explicit endpoint switches to path-style addressing, which S3-compatible servers expect. Integrity and retries:

* every object carries its SHA-256 in metadata (``x-amz-meta-sha256``), checked on download, and is sent with an
  ``x-amz-checksum-sha256`` header (each part's own for multipart uploads) that the server checks before it stores
  anything (a body changed on the way is refused: ``BadDigest``);
* botocore's ``standard`` retry mode retries 5xx, throttling (``503 SlowDown``) and connection errors (bounded,
  with backoff); on top of it a whole upload or download is retried a few times with backoff (a reset in the
  middle of a multipart upload, a checksum mismatch) before an :class:`InfrastructureError`; refusals that a
  retry cannot cure (bad credentials, access denied, no such bucket) fail at once with the fix;
* files above ``multipart_threshold`` go up in parts (boto3 ``TransferConfig``), and such an upload is
  verified with a HEAD (size and checksum) before it counts as stored; a single PUT counts as stored when the
  server's answer echoes the SHA-256 it checked (else it is verified with a HEAD too);
* ``put_bytes(..., exclusive=True)`` sends ``If-None-Match: *``: the server stores the object only when the key
  is free (``412 PreconditionFailed`` otherwise: :class:`~anchorage.store.base.AlreadyStored` unless the object
  there is these very bytes, a retried write of ours). A server that answers ``501 NotImplemented`` gets a
  HEAD-then-PUT instead, which is not atomic (logged once; docs/design-notes.md, "Store").

Botocore's own automatic checksums stay ``when_required`` (the ones above are asked for explicitly and go in
headers: trailing checksums in ``aws-chunked`` bodies are refused by many S3-compatible servers).
"""

from __future__ import annotations

import base64
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ProfileNotFound

from anchorage.errors import InfrastructureError, InputError
from anchorage.store.base import AlreadyStored, ArtifactStore, check_key, join, sha256_bytes, sha256_file

T = TypeVar("T")
SHA_KEY = "sha256"
MISSING = frozenset({"404", "NoSuchKey", "NotFound"})
TAKEN = frozenset({"412", "PreconditionFailed"})
UNSUPPORTED = frozenset({"501", "NotImplemented"})
#: Refusals no retry cures: the error names the fix at once.
FATAL = {
    "InvalidAccessKeyId": "the access key is unknown to the server: check AWS_ACCESS_KEY_ID, AWS_PROFILE or the "
                          "web identity settings",
    "SignatureDoesNotMatch": "the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY or the "
                             "profile's aws_secret_access_key",
    "AccessDenied": "the credentials may not do this: grant them s3:GetObject, PutObject, DeleteObject and "
                    "ListBucket on the bucket",
    "403": "the server refused the credentials: check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE",
    "ExpiredToken": "the session credentials expired: renew them (a web identity token file is re-read by boto3)",
    "NoSuchBucket": "the bucket does not exist: create it (aws s3 mb s3://BUCKET) or fix the store URI",
    "InvalidBucketName": "the bucket name is not valid: use 3-63 lowercase letters, digits, dots or hyphens",
}
log = logging.getLogger(__name__)


class ChecksumMismatch(InfrastructureError):
    """A downloaded or uploaded object does not match its recorded SHA-256."""


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code"))


def _answer(exc: BaseException) -> ClientError | None:
    """The server's answer behind ``exc`` (itself, or the ClientError a boto3 transfer error was raised from)."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, ClientError):
        seen = seen.__cause__ or seen.__context__
    return seen


def _missing(exc: ClientError) -> bool:
    return _code(exc) in MISSING


def _b64(hex_digest: str) -> str:
    """A hex SHA-256 as the base64 of its bytes (the form of ``x-amz-checksum-sha256``)."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


class S3Store(ArtifactStore):
    """Objects under ``s3://bucket/prefix``."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 attempts: int = 3, botocore_attempts: int = 5, backoff_seconds: float = 0.2,
                 multipart_threshold: int = 8 * 1024 * 1024, multipart_chunksize: int = 8 * 1024 * 1024,
                 client: Any = None) -> None:
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.attempts, self.backoff_seconds = attempts, backoff_seconds
        self.conditional_writes = True  # until the server answers If-None-Match with 501 NotImplemented
        self._written: dict[str, tuple[str, str]] = {}  # key -> (ETag, sha256) of what this store wrote and checked
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        config = Config(
            retries={"mode": "standard", "max_attempts": botocore_attempts},
            connect_timeout=10, read_timeout=60,
            s3={"addressing_style": "path" if endpoint else "auto"},
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
        )
        try:
            self.client = client or boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
        except ProfileNotFound as exc:
            raise InputError(f"{self.uri}: the AWS profile {os.environ.get('AWS_PROFILE')!r} does not exist",
                             hint="name a profile of AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE (~/.aws/config, "
                                  "~/.aws/credentials) in AWS_PROFILE, or unset it") from exc
        self.transfer = TransferConfig(multipart_threshold=multipart_threshold,
                                       multipart_chunksize=multipart_chunksize, use_threads=False)

    def _key(self, key: str) -> str:
        return join(self.prefix, check_key(key))

    def _retrying(self, what: str, action: Callable[[], T]) -> T:
        """Run ``action`` up to ``attempts`` times; infrastructure failures become InfrastructureError."""
        for attempt in range(1, self.attempts + 1):
            try:
                return action()
            except (ClientError, Boto3Error) as exc:  # boto3's transfers wrap the server's answer in their own error
                answer = _answer(exc)
                if answer is not None and _missing(answer):
                    raise FileNotFoundError(f"{self.uri}: {what}: no such object") from exc
                if answer is not None and _code(answer) in FATAL:
                    raise InfrastructureError(f"{self.uri}: {what} refused: {answer}",
                                              hint=FATAL[_code(answer)]) from exc
                failure: Exception = exc
            except (FileNotFoundError, FileExistsError):
                raise
            except NoCredentialsError as exc:
                raise InfrastructureError(f"{self.uri}: {what}: no credentials found", hint=(
                    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or AWS_ROLE_ARN with "
                    "AWS_WEB_IDENTITY_TOKEN_FILE")) from exc
            except (BotoCoreError, ChecksumMismatch, OSError) as exc:
                failure = exc
            if attempt == self.attempts:
                raise InfrastructureError(
                    f"{self.uri}: {what} failed after {attempt} attempts: {failure}",
                    hint="check the S3 endpoint, credentials and bucket (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID)",
                ) from failure
            time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    # ----- writes --------------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes, *, content_type: str | None = None, exclusive: bool = False) -> None:
        extra: dict[str, str] = {"ContentType": content_type} if content_type else {}
        digest = sha256_bytes(data)

        def put() -> None:
            conditional = exclusive and self.conditional_writes
            if exclusive and not conditional and self._holds(key):
                self._same_or_taken(key, digest)
                return
            try:
                answer = self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data,
                                                Metadata={SHA_KEY: digest}, ChecksumSHA256=_b64(digest),
                                                **({"IfNoneMatch": "*"} if conditional else {}), **extra)
            except ClientError as exc:
                if exclusive and _code(exc) in TAKEN:
                    self._same_or_taken(key, digest)
                    return
                if conditional and _code(exc) in UNSUPPORTED:
                    log.warning("%s: the server does not support If-None-Match on PUT; exclusive writes fall back to "
                                "HEAD then PUT, which two concurrent writers can both pass", self.uri)
                    self.conditional_writes = False
                    put()
                    return
                raise
            if answer.get("ChecksumSHA256") == _b64(digest):  # the server checked our checksum
                self._remember(key, answer.get("ETag"), digest)
            else:
                self._verify_stored(key, len(data), digest)

        self._retrying(f"put {key}", put)

    def _holds(self, key: str) -> bool:
        """One HEAD of ``key``: whether an object is there (a missing one is ``False``, other errors raise)."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _missing(exc):
                return False
            raise
        return True

    def _same_or_taken(self, key: str, digest: str) -> None:
        """An exclusive write found ``key`` taken: nothing wrong when the object there is these very bytes (our own
        earlier attempt, whose answer was lost), else :class:`AlreadyStored`."""
        stored = self.client.head_object(Bucket=self.bucket, Key=self._key(key)).get("Metadata", {}).get(SHA_KEY)
        if stored != digest:
            raise AlreadyStored(f"{self.uri_of(key)} already exists with other content (sha256 {stored}, not "
                                f"{digest})")

    def put_file(self, key: str, path: Path) -> None:
        size = path.stat().st_size
        if size < self.transfer.multipart_threshold:  # one request: no transfer manager to set up
            self.put_bytes(key, path.read_bytes())
            return
        digest = sha256_file(path)

        def upload() -> None:
            self.client.upload_file(str(path), self.bucket, self._key(key), Config=self.transfer,
                                    ExtraArgs={"Metadata": {SHA_KEY: digest}, "ChecksumAlgorithm": "SHA256"})
            self._verify_stored(key, size, digest)

        self._retrying(f"upload {path} to {key}", upload)

    def _verify_stored(self, key: str, size: int, digest: str) -> None:
        head = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        stored = head.get("Metadata", {}).get(SHA_KEY)
        if head.get("ContentLength") != size or stored != digest:
            raise ChecksumMismatch(f"{self.uri_of(key)}: stored object has size {head.get('ContentLength')} "
                                   f"and sha256 {stored}, expected {size} and {digest}")
        self._remember(key, head.get("ETag"), digest)

    def _remember(self, key: str, etag: str | None, digest: str) -> None:
        """What this store wrote (a completion manifest then needs no HEAD for it while its ETag is unchanged)."""
        if etag:
            if len(self._written) > 100_000:
                self._written.clear()
            self._written[self._key(key)] = (etag, digest)

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
        return self._retrying(f"head {key}", lambda: self._holds(key))

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

    def described(self, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """As :meth:`ArtifactStore.described`, from one listing: an object this store wrote itself (same ETag in the
        listing) is described from what it sent and the server checked; any other gets a HEAD."""
        root = join(self.prefix, check_key(prefix))

        def collect() -> list[dict[str, Any]]:
            items: list[dict[str, Any]] = []
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=root + "/"):
                items += page.get("Contents", [])
            return items

        strip = len(self.prefix) + 1 if self.prefix else 0
        for item in sorted(self._retrying(f"list {prefix}", collect), key=lambda entry: str(entry["Key"])):
            key: str = item["Key"][strip:]
            known = self._written.get(item["Key"])
            if known is not None and known[0] == item.get("ETag"):
                yield key, {"size": item.get("Size"), "sha256": known[1]}
            else:
                yield key, self.describe(key)

    def delete(self, key: str) -> None:
        self._written.pop(self._key(key), None)
        self._retrying(f"delete {key}", lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key(key)))
