"""The web page (with the stage registry's event sources written in) and the bundled sample corpus
its citations open."""

from __future__ import annotations

import functools
import html
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from services.gateway.replies import error
from shared.runtime.stages import QUERY_EVENT_SOURCES

WEB_DIR = Path(__file__).parent / "web"
# The page loads only its own files; untrusted document text is rendered as text
# by the script, and the policy is a second line of defence against injection.
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

_STAGE_EVENTS_META = '<meta name="ragbus-stage-events" content="">'



@functools.cache
def page_html() -> str:
    """index.html with the stage registry's event sources, which its script listens for."""
    page = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    if _STAGE_EVENTS_META not in page:
        raise RuntimeError(f"{WEB_DIR / 'index.html'} lost its {_STAGE_EVENTS_META}")
    return page.replace(_STAGE_EVENTS_META, _STAGE_EVENTS_META.replace(
        'content=""', f'content="{html.escape(",".join(QUERY_EVENT_SOURCES))}"'))


async def page(request: Request) -> Response:
    return HTMLResponse(page_html(), headers=_PAGE_HEADERS)


async def sample(request: Request) -> Response:
    """The bundled sample corpus, as `ragbus demo` fed it: its citations open here."""
    from shared.corpus import SAMPLE_PATH, sample_file

    base = f"{request.url.scheme}://{request.url.netloc}{SAMPLE_PATH}"
    found = sample_file(request.path_params["path"], base)
    if found is None:
        return error(404, f"no sample file {request.url.path}")
    body, media_type = found
    return Response(body, media_type=media_type)
