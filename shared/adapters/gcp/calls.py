"""One translation of Google API errors into the project's two kinds of failure.

Every gcp adapter wraps its calls in :func:`calling`: a transient error
(unavailable, deadline, contention) becomes a :class:`~shared.contract.errors.RetryableError`
so the message is redelivered, an error that retrying cannot fix becomes a
:class:`~shared.contract.errors.PermanentError` naming what to check, and anything
else passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from google.api_core import exceptions as gexc

from shared.contract.errors import PermanentError, RetryableError

#: What Firestore raises when trying again later may succeed.
FIRESTORE_TRANSIENT: tuple[type[Exception], ...] = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.Aborted,
    gexc.ResourceExhausted,
    gexc.Unknown,
)

#: What Vertex AI raises when trying again later may succeed.
VERTEX_TRANSIENT: tuple[type[Exception], ...] = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.TooManyRequests,
    gexc.Aborted,
    gexc.Unknown,
)


@contextmanager
def calling(
    service: str,
    what: str,
    *,
    transient: tuple[type[Exception], ...],
    refused: tuple[type[Exception], ...] = (),
    refused_hint: str = "",
    transaction_attempts: int | None = None,
) -> Iterator[None]:
    """Run the body, translating ``service``'s errors for the call described by ``what``.

    ``refused``: errors that are the caller's configuration, not the weather
    (``refused_hint`` says what to check). ``transaction_attempts``: the body
    runs a Firestore transaction, whose client raises ValueError (caused by
    Aborted) once its attempts are used up under contention: that is retryable.
    """
    try:
        yield
    except transient as exc:
        raise RetryableError(f"{service} {what} failed for now ({type(exc).__name__}): {exc}") from exc
    except refused as exc:
        raise PermanentError(
            f"{service} refused the {what} ({type(exc).__name__}): {exc}; {refused_hint}"
        ) from exc
    except ValueError as exc:
        if transaction_attempts is not None and isinstance(exc.__cause__, gexc.Aborted):
            raise RetryableError(
                f"{service} {what} kept conflicting with other writers of the same document "
                f"({transaction_attempts} attempts); the message will be redelivered"
            ) from exc
        raise
