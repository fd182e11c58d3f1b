"""The one error hierarchy every stage uses.

A :class:`RetryableError` is raised so the bus redelivers the message with
backoff; a :class:`PermanentError` is recorded and the message acknowledged
(or dead-lettered), because trying again cannot help. Every message says what
was wrong and what to do about it.
"""

from __future__ import annotations


class RagbusError(Exception):
    """Base of every error ragbus raises on purpose."""


class RetryableError(RagbusError):
    """A transient failure: the same message may succeed later (network, 5xx, lock)."""


class PermanentError(RagbusError):
    """A failure that retrying cannot fix (bad input, unknown schema, refused URL)."""


class ConfigError(PermanentError):
    """A missing or invalid setting; the message names the variable."""


class SchemaError(PermanentError):
    """A message whose type or schema version this code does not understand."""


class FetchRefused(PermanentError):
    """A URL that must not be fetched (private address, bad scheme, too large...)."""


class InvalidInput(PermanentError):
    """Input from a user or a document that cannot be processed as given."""


class DataFileError(PermanentError):
    """A data file under RAGBUS_HOME (a SQLite database) that is damaged, empty, cannot be
    written or has no room left; the message names the file and the way out. ``kind`` is
    ``damaged``, ``empty``, ``unwritable``, ``full`` or ``other``, for an owner that can
    rebuild what it lost (the index)."""

    def __init__(self, message: str, kind: str = "other") -> None:
        super().__init__(message)
        self.kind = kind


class ModelUnusable(PermanentError):
    """The model API refused the request itself (unknown or retired model, invalid
    argument, no permission): every call will fail the same way until the
    configuration changes, so this ends the query instead of being papered over
    with a fallback. ``status`` is the HTTP status the API answered.
    """

    def __init__(self, message: str, *, model: str, status: int, operation: str = "") -> None:
        super().__init__(message)
        self.model = model
        self.status = status
        self.operation = operation
