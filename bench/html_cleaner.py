"""The HTML cleaner on real DocBook/XHTML pages: how much of each page's body text, headings and link
text three extractions keep, page by page.

- ``trafilatura``: trafilatura alone (``extract_html`` as main had it before the DocBook path, 81d16cd^,
  with ``prepare_html`` a no-op);
- ``base``: ``extract_html`` as the baseline revision has it (``--baseline``, default 81d16cd^: main
  with a6ef60c's heading unwrapping, before the DocBook path);
- ``now``: ``extract_html`` of the working tree.

The reference is read from the page itself, with no extractor: every block of text (paragraphs,
list items, definitions, table cells, code, headings) outside the page's navigation (DocBook's
navheader/navfooter, Publican's docnav, tables of contents, Sphinx's sidebars, <nav>, <header>,
<footer>). Its sentences (four words or more) must each appear in the extraction (compared as
lower-case words, punctuation and markup ignored): **sentence recall**, and the characters of the
sentences found. A heading is kept when it is a line of its own in the extraction, a link when its
text appears; a navigation leak is an extracted line that is only the text of a navigation block
(``Prev``, ``Next``, a neighbouring page's title) and no body block's.

A page *loses* when ``now`` finds fewer body sentences than the better of ``trafilatura`` and
``base``.

    PYTHONPATH=$PWD python bench/html_cleaner.py                  # the default sample (see SAMPLE)
    PYTHONPATH=$PWD python bench/html_cleaner.py --baseline main PAGE.html ...
    PYTHONPATH=$PWD python bench/html_cleaner.py --edition /usr/share/doc/debian/FAQ/debian-faq.en.txt.gz \
        /usr/share/doc/debian/FAQ/*.en.html
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE_DOCBOOK = "81d16cd^"  # main before shared.formats.docbook (which every later revision calls)

# (glob, stride): every stride-th file of the sorted glob. DocBook XSL (Debian FAQ, Reference, New
# Maintainers' Guide, copyright-format, debconf spec, valgrind), Publican DocBook (the Debian
# Administrator's Handbook in two languages, the Securing Debian manual), Sphinx XHTML (Developer's
# Reference, Policy, Python's docs) and hand-written XHTML (Debian history).
SAMPLE = (
    ("/usr/share/doc/debian-handbook/html/en-US/*.html", 5),
    ("/usr/share/doc/debian-handbook/html/en-US/sect.package-meta-information.html", 1),
    ("/usr/share/doc/debian-handbook/html/fr-FR/*.html", 25),
    ("/usr/share/doc/harden-doc/html/en-US/*.html", 15),
    ("/usr/share/doc/debian/FAQ/*.en.html", 4),
    ("/usr/share/debian-reference/ch*.en.html", 3),
    ("/usr/share/doc/maint-guide/html/*.en.html", 3),
    ("/usr/share/doc/debian-policy/copyright-format-1.0.html", 1),
    ("/usr/share/doc/debian-policy/debconf_specification.html", 1),
    ("/usr/share/doc/valgrind/html/*.html", 8),
    ("/usr/share/developers-reference/*.html", 4),
    ("/usr/share/doc/debian-policy/policy/ch-*.html", 5),
    ("/usr/share/doc/python3.11/html/library/*.html", 60),
    ("/usr/share/doc/debian-history/docs/*.en.html", 3),
)

_NAV_CLASSES = re.compile(  # whole class names: "toc", not Sphinx's "toc-backref" (a heading's own link)
    r"(?:^|\s)(navheader|navfooter|docnav|toc|list-of-[\w-]+|sphinxsidebar\w*|related|footer|header|"
    r"breadcrumbs?|headerlink|banner)(?=\s|$)")
_NAV_TAGS = ("nav", "header", "footer")
_INLINE = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i ins kbd mark q s samp small span strike strong "
    "sub sup time tt u var br wbr img".split())
_WORDS = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+")


def _words(text: str) -> str:
    return " ".join(_WORDS.findall(text.casefold()))


def sample_pages() -> list[Path]:
    pages: list[Path] = []
    for pattern, stride in SAMPLE:
        found = sorted(Path("/").glob(pattern.lstrip("/")))
        pages += [p for p in found[::stride] if p not in pages]
    return pages


def _is_nav(node) -> bool:
    return node.tag in _NAV_TAGS or bool(_NAV_CLASSES.search(node.get("class") or "")) or \
        node.get("id") in ("banner", "title") and node.tag != "title" or \
        (node.get("summary") or "").startswith("Navigation")  # DocBook XSL's navigation tables


def _blocks(node, out: list[str], nav: list[str], in_nav: bool = False) -> None:
    """The text of ``node`` cut at every block boundary, into ``out`` (or ``nav`` under navigation)."""
    buffer: list[str] = []
    target = nav if in_nav else out

    def flush():
        text = " ".join("".join(buffer).split())
        if text:
            target.append(text)
        buffer.clear()

    buffer.append(node.text or "")
    for child in node:
        if not isinstance(child.tag, str):
            buffer.append(child.tail or "")
            continue
        if child.tag in ("script", "style", "head", "title", "noscript"):
            buffer.append(child.tail or "")
            continue
        if child.tag in _INLINE and not _is_nav(child):
            buffer.append(_inline_text(child))
            buffer.append(child.tail or "")
            continue
        flush()
        _blocks(child, out, nav, in_nav or _is_nav(child))
        buffer.append(child.tail or "")
    flush()


def _inline_text(node) -> str:
    if node.tag == "br":
        return " "
    parts = [node.text or ""]
    for child in node:
        if isinstance(child.tag, str):
            parts.append(_inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def reference(html: str) -> dict:
    """The page's body blocks, sentences, headings, link texts and navigation blocks, read from its DOM."""
    import lxml.html

    tree = lxml.html.document_fromstring(re.sub(r"\A\s*<\?xml[^>]*\?>", "", html, count=1))
    for element in tree.iter():  # XHTML served as HTML: the names lxml sees may carry a namespace
        if isinstance(element.tag, str) and "}" in element.tag:
            element.tag = element.tag.split("}", 1)[1]
    body = tree.find("body")
    blocks: list[str] = []
    nav: list[str] = []
    _blocks(body if body is not None else tree, blocks, nav)
    sentences: list[str] = []
    for block in blocks:
        for sentence in _SENTENCE.split(block):
            if len(_WORDS.findall(sentence)) >= 4 and _words(sentence) not in sentences:
                sentences.append(_words(sentence))
    headings, links = [], []
    for element in tree.iter("h1", "h2", "h3", "h4", "h5", "h6", "a"):
        if any(_is_nav(a) for a in element.iterancestors()) or _is_nav(element):
            continue
        text = " ".join(element.text_content().split())
        if element.tag == "a":
            if len(_WORDS.findall(text)) and element.get("href") and _words(text) not in links:
                links.append(_words(text))
        elif text and _words(text) not in headings:
            headings.append(_words(text))
    body_words = {_words(b) for b in blocks}
    return {"sentences": sentences, "headings": headings, "links": links,
            "nav": {_words(n) for n in nav if _words(n)} - body_words}


def score(ref: dict, text: str) -> dict:
    flat = " " + _words(text) + " "
    lines = {_words(line) for line in text.splitlines()}
    found = [s for s in ref["sentences"] if f" {s} " in flat]
    return {
        "chars": len(text),
        "sentences": len(found),
        "sentence_chars": sum(len(s) for s in found),
        "headings": sum(h in lines for h in ref["headings"]),
        "links": sum(f" {link} " in flat for link in ref["links"]),
        "nav": sum(line in ref["nav"] for line in lines if line),
    }


def _sentences(text: str) -> list[str]:
    return [_words(s) for s in _SENTENCE.split(" ".join(text.split())) if len(_WORDS.findall(s)) >= 4]


def edition_scores(edition: Path, texts: dict[str, list[str]]) -> None:
    """The pages together against the book's plain-text edition, which no extractor wrote: the share of
    the edition's sentences some page's extraction holds (recall), and the share of the extractions'
    sentences the edition holds (precision: navigation or a table of contents left in lowers it)."""
    import gzip

    raw = edition.read_bytes()
    book = (gzip.decompress(raw) if edition.suffix == ".gz" else raw).decode("utf-8", "replace")
    wanted = set(_sentences(book))
    flat_book = " " + _words(book) + " "
    print(f"\nagainst {edition} ({len(wanted)} sentences):")
    for name, pages in texts.items():
        flat = " " + " ".join(_words(text) for text in pages) + " "
        found = sum(f" {s} " in flat for s in wanted)
        extracted = {s for text in pages for s in _sentences(text)}
        held = sum(f" {s} " in flat_book for s in extracted)
        print(f"{name:12} recall {found / max(1, len(wanted)):.3f} ({found}), precision "
              f"{held / max(1, len(extracted)):.3f} ({held} of {len(extracted)})")


def baseline_module(revision: str) -> types.ModuleType:
    source = subprocess.run(["git", "show", f"{revision}:shared/formats/text.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"text_at_{revision.replace('^', '_parent')}")
    module.__file__ = f"{revision}:shared/formats/text.py"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to read (default: the sample)")
    parser.add_argument("--baseline", default=BEFORE_DOCBOOK,
                        help=f"the revision 'base' is (default {BEFORE_DOCBOOK})")
    parser.add_argument("--show", type=Path, help="print, for this page, the sentences 'now' misses")
    parser.add_argument("--edition", type=Path,
                        help="the book's plain-text edition (.txt or .txt.gz) the pages were built with: also "
                             "score the pages together against it")
    args = parser.parse_args()

    from shared.formats import text as now

    base = baseline_module(args.baseline)
    alone = baseline_module(BEFORE_DOCBOOK)
    alone.prepare_html = lambda html: (html, "")
    variants = (("trafilatura", alone.extract_html), ("base", base.extract_html), ("now", now.extract_html))

    pages = [page.resolve() for page in args.pages if page.is_file()] or sample_pages()
    totals = {name: dict.fromkeys(("sentences", "sentence_chars", "headings", "links", "nav", "seconds"), 0.0)
              for name, _ in variants}
    ref_totals = dict.fromkeys(("sentences", "headings", "links"), 0)
    losses = 0
    texts: dict[str, list[str]] = {name: [] for name, _ in variants}
    print(f"{'page':58} {'sent':>5} | {'traf':>5} {'base':>5} {'now':>5} | {'head t/b/n':>12} | "
          f"{'links t/b/n':>13} | {'nav t/b/n':>9} | chars t/b/n")
    for page in pages:
        html = now.decode_bytes(page.read_bytes(), None, html=True)
        ref = reference(html)
        row = {}
        for name, extract in variants:
            start = time.perf_counter()
            text = extract(html, page.as_uri()).body
            texts[name].append(text)
            totals[name]["seconds"] += time.perf_counter() - start
            row[name] = score(ref, text)
            for key in ("sentences", "sentence_chars", "headings", "links", "nav"):
                totals[name][key] += row[name][key]
            if name == "now" and args.show == page:
                flat = " " + _words(text) + " "
                for sentence in ref["sentences"]:
                    if f" {sentence} " not in flat:
                        print("  missing:", sentence[:150])
        for key in ref_totals:
            ref_totals[key] += len(ref[key])
        best = max(row["trafilatura"]["sentences"], row["base"]["sentences"])
        lost = row["now"]["sentences"] < best
        losses += lost
        t, b, n = row["trafilatura"], row["base"], row["now"]
        name = "/".join(page.parts[-2:])
        print(f"{name[-58:]:58} {len(ref['sentences']):5} | {t['sentences']:5} {b['sentences']:5} "
              f"{n['sentences']:5}{'!' if lost else ' '}| {len(ref['headings']):3}:{t['headings']:2}/{b['headings']:2}/"
              f"{n['headings']:2} | {len(ref['links']):3}:{t['links']:3}/{b['links']:3}/{n['links']:3} | "
              f"{t['nav']:2}/{b['nav']:2}/{n['nav']:2} | {t['chars']}/{b['chars']}/{n['chars']}")
    print(f"\n{len(pages)} pages; reference: {ref_totals['sentences']} sentences, {ref_totals['headings']} "
          f"headings, {ref_totals['links']} links")
    for name, total in totals.items():
        print(f"{name:12} sentence recall {total['sentences'] / max(1, ref_totals['sentences']):.3f} "
              f"({int(total['sentence_chars'])} chars), headings {total['headings'] / max(1, ref_totals['headings']):.3f}, "
              f"links {total['links'] / max(1, ref_totals['links']):.3f}, nav lines {int(total['nav'])}, "
              f"{total['seconds']:.1f} s")
    print(f"pages where 'now' finds fewer body sentences than the better of trafilatura and base: {losses}")
    if args.edition:
        edition_scores(args.edition, texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
