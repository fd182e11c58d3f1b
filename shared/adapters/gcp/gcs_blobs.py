"""The BlobStore port on Google Cloud Storage.

References are ``gs://<bucket>/<object>``. With ``STORAGE_EMULATOR_HOST`` set
(fake-gcs-server in tests) the client talks to it with anonymous credentials.
"""

from __future__ import annotations

import logging
import os
import threading

from google.api_core import exceptions as gexc
from google.cloud import storage
from google.cloud.storage.retry import DEFAULT_RETRY

from shared.contract.errors import ConfigError, RetryableError

log = logging.getLogger("ragbus.gcs")

_TRANSIENT = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.TooManyRequests,
    gexc.BadGateway,
    gexc.GatewayTimeout,
)


def parse_ref(ref: str) -> tuple[str, str]:
    """``gs://bucket/object`` -> (bucket, object); :class:`KeyError` for anything else."""
    if not ref.startswith("gs://"):
        raise KeyError(f"{ref!r} is not a GCS blob reference (expected 'gs://<bucket>/<object>')")
    bucket, _, name = ref[len("gs://") :].partition("/")
    if not bucket or not name:
        raise KeyError(f"{ref!r} names no object (expected 'gs://<bucket>/<object>')")
    return bucket, name


class GcsBlobStore:
    """Blobs as objects of one bucket; ``get``/``delete`` also accept refs into other buckets.

    The client is built on first use. Writes overwrite and carry the same bytes
    on a retry, so they are retried like idempotent calls; transient failures
    that outlast the client's retries become :class:`RetryableError`.
    """

    def __init__(
        self,
        bucket: str,
        *,
        project: str | None = None,
        client: storage.Client | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        if not bucket:
            raise ConfigError("GcsBlobStore needs a bucket name (set RAGBUS_BUCKET)")
        self.bucket_name = bucket
        self._project = project
        self._client = client
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    @property
    def client(self) -> storage.Client:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    if os.environ.get("STORAGE_EMULATOR_HOST"):
                        from google.auth.credentials import AnonymousCredentials

                        self._client = storage.Client(
                            project=self._project or "ragbus-emulator",
                            credentials=AnonymousCredentials(),
                        )
                    else:
                        self._client = storage.Client(project=self._project)
        return self._client

    def ref(self, key: str) -> str:
        return f"gs://{self.bucket_name}/{key}"

    def ensure_bucket(self) -> None:
        """Create the bucket unless it exists (emulator set-up; Terraform owns it in the cloud)."""
        try:
            self.client.create_bucket(self.bucket_name)
            log.info("created bucket %s", self.bucket_name)
        except gexc.Conflict:  # 409: it exists (ours, or taken by someone else)
            pass

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        if not key or key.startswith("/"):
            raise ValueError(f"blob key {key!r} must be a non-empty relative name")
        blob = self.client.bucket(self.bucket_name).blob(key)
        try:
            blob.upload_from_string(
                data, content_type=content_type, retry=DEFAULT_RETRY, timeout=self.timeout_s
            )
        except _TRANSIENT as exc:
            raise RetryableError(f"storing {self.ref(key)} failed for now: {exc}") from exc
        return self.ref(key)

    def get(self, ref: str) -> bytes:
        bucket, name = parse_ref(ref)
        try:
            return self.client.bucket(bucket).blob(name).download_as_bytes(timeout=self.timeout_s)
        except gexc.NotFound:
            raise KeyError(f"no blob at {ref!r}") from None
        except _TRANSIENT as exc:
            raise RetryableError(f"reading {ref} failed for now: {exc}") from exc

    def delete(self, ref: str) -> None:
        bucket, name = parse_ref(ref)
        try:
            self.client.bucket(bucket).blob(name).delete(timeout=self.timeout_s)
        except gexc.NotFound:
            pass  # like the local store: deleting what is gone is not an error
        except _TRANSIENT as exc:
            raise RetryableError(f"deleting {ref} failed for now: {exc}") from exc
