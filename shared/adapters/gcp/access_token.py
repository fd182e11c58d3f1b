"""OAuth access tokens from Application Default Credentials, for the adapters that call Google's
REST APIs themselves (Vector Search, Document AI): refreshed when expired, one refresh at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable

SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def default_token() -> tuple[Callable[[], str], str | None]:
    """A function returning a valid access token of the default credentials (the function's
    service account on Cloud Run), and the credentials' default project."""
    import google.auth
    from google.auth.transport.requests import Request

    credentials, project = google.auth.default(scopes=[SCOPE])
    lock = threading.Lock()

    def token() -> str:
        with lock:
            if not credentials.valid:
                credentials.refresh(Request())
            return str(credentials.token)

    return token, project
