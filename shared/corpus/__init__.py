"""The bundled sample corpus: Markdown and text documents, and a small site with an RSS feed.

``ragbus demo`` ingests it, the gateway serves the site under ``/sample/`` so the
sample citations keep opening, and tests and benchmarks use it as a fixture.
"""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parent
SAMPLE_PATH = "/sample"
_SAMPLE_TYPES = {".xml": "application/rss+xml", ".html": "text/html; charset=utf-8"}


def sample_file(path: str, base: str) -> tuple[bytes, str] | None:
    """The sample site's file at ``path`` (relative to ``/sample/``) with ``{{BASE}}`` made
    ``base``, and its content type; None when there is no such file (or it is outside). The
    site's root (an empty ``path``) is a page listing the feed and the articles."""
    site = (CORPUS / "site").resolve()
    if not path.strip("/"):
        files = ["feed.xml", *(f"articles/{p.name}" for p in sorted((site / "articles").glob("*.html")))]
        items = "".join(f'<li><a href="{base}/{name}">{name}</a></li>' for name in files)
        page = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>ragbus sample site</title></head>"
                f"<body><h1>ragbus sample site</h1><p>The feed <code>ragbus demo</code> reads, and its "
                f"articles.</p><ul>{items}</ul></body></html>")
        return page.encode(), _SAMPLE_TYPES[".html"]
    if "\x00" in path:  # no file is named so (and resolve() raised ValueError: a 500)
        return None
    target = (site / path.lstrip("/")).resolve()
    if not target.is_relative_to(site) or not target.is_file() or target.suffix not in _SAMPLE_TYPES:
        return None
    return target.read_bytes().replace(b"{{BASE}}", base.encode()), _SAMPLE_TYPES[target.suffix]
