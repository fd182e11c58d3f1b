"""Chunking: windows the embedder never truncates, with overlap, header-only chunks dropped."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from services.indexer.chunking import chunk_document, chunk_text, plan_windows
from shared.adapters.local.embedder import OnnxMiniLMEmbedder
from shared.contract.ids import chunk_id
from shared.contract.text import strip_header, with_header
from tests.support import topic_paragraphs


class WordEmbedder:
    """A fake whose tokens are whitespace-separated words (only chunking uses it)."""

    model_name = "words"
    dimension = 4
    max_tokens = 30

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S+", text)]

    def embed(self, texts):  # pragma: no cover - chunking never embeds
        raise AssertionError("chunking must not embed")


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder()


def _document(paragraphs: int = 10, topic: str = "volcano") -> str:
    return with_header(f"All about {topic}", "2026-10-01", f"https://x.example/{topic}",
                       "\n\n".join(topic_paragraphs(topic, n=paragraphs)))


def _chunks(text: str, embedder) -> list:
    return chunk_document(text, document_id="doc-1", content_hash="ab" * 32, embedder=embedder,
                          title="All about volcano", url="https://x.example/volcano", published="2026-10-01",
                          source="feed")


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("which", ["fake", "minilm"])
def test_no_chunk_exceeds_the_window_and_every_sentence_is_kept(which, minilm):
    embedder = WordEmbedder() if which == "fake" else minilm
    text = _document(paragraphs=12)
    chunks = _chunks(text, embedder)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert 0 < len(embedder.token_spans(chunk.text)) <= embedder.max_tokens
    joined = " ".join(" ".join(c.text.split()) for c in chunks)
    for paragraph in topic_paragraphs("volcano", n=12):
        for sentence in re.split(r"(?<=\.) ", paragraph):
            assert sentence in joined


@pytest.mark.parametrize("which", ["fake", "minilm"])
def test_consecutive_chunks_overlap_by_about_a_sixth(which, minilm):
    embedder = WordEmbedder() if which == "fake" else minilm
    chunks = _chunks(_document(paragraphs=12), embedder)
    assert len(chunks) >= 3
    for before, after in pairwise(chunks):
        b, a = _words(before.text), _words(after.text)
        starts = [i for i in range(len(b)) if b[i : i + 4] == a[:4]]
        assert starts, "the next chunk starts inside the previous one"
        shared = b[starts[-1]:]
        assert a[: len(shared)] == shared
        shared_tokens = len(embedder.token_spans(" ".join(shared)))
        # about a sixth of the window, moved to the nearest sentence or word boundary
        assert embedder.max_tokens // 12 <= shared_tokens <= embedder.max_tokens // 3


def test_cuts_snap_to_sentence_ends_when_there_are_sentences(minilm):
    chunks = _chunks(_document(paragraphs=12), minilm)
    for chunk in chunks:
        assert chunk.text.rstrip()[-1] in ".!?", chunk.text[-40:]
        assert chunk.text[0].isupper()


def test_text_without_sentence_ends_is_cut_at_word_boundaries():
    embedder = WordEmbedder()
    words = [f"w{n:03d}" for n in range(200)]
    text = " ".join(words)
    pieces = chunk_text(text, embedder.token_spans, embedder.max_tokens)
    for piece in pieces:
        assert all(w in words for w in piece.split())  # no word was split
        assert len(piece.split()) <= 30
    assert pieces[0].split()[0] == "w000" and pieces[-1].split()[-1] == "w199"


def test_one_enormous_word_still_fits_the_model(minilm):
    text = "Intro sentence here. " + "x9" * 900 + " and then the end of it."
    for piece in chunk_text(text, minilm.token_spans, minilm.max_tokens):
        assert len(minilm.token_spans(piece)) <= minilm.max_tokens


def test_header_only_chunks_are_dropped():
    embedder = WordEmbedder()
    assert _chunks(with_header("A title", None, "https://x.example/a", ""), embedder) == []
    enough = with_header("A title", None, "https://x.example/a", "word " * 25)
    (only,) = _chunks(enough, embedder)
    assert len(strip_header(only.text)) >= 100
    # a long document's short last window is dropped (its words are in the overlap before it)
    long = _chunks(with_header("A title", None, "https://x.example/a", "word " * 28 + "end."), embedder)
    assert long and all(len(strip_header(c.text)) >= 100 for c in long)


def test_a_document_shorter_than_a_chunk_body_is_one_chunk_not_lost():
    # a new user's two-line README.md was a dead letter that failed the whole ingest (issue 31)
    embedder = WordEmbedder()
    (only,) = _chunks(with_header("A title", None, "https://x.example/a", "Too short to index."), embedder)
    assert strip_header(only.text) == "Too short to index." and only.ordinal == 0


def test_a_long_header_still_leaves_every_kept_chunk_a_body():
    embedder = WordEmbedder()
    # the first window is nearly all header, the rest is long enough
    text = with_header("t " * 10, None, "https://x.example/a", "\n".join(["Short line."] + ["body words go on"] * 12))
    chunks = _chunks(text, embedder)
    assert chunks and all(len(strip_header(c.text)) >= 100 for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_chunks_carry_ids_and_metadata():
    chunks = _chunks(_document(paragraphs=6), WordEmbedder())
    for n, chunk in enumerate(chunks):
        assert chunk.ordinal == n
        assert chunk.chunk_id == chunk_id("doc-1", "ab" * 32, n)
        assert (chunk.document_id, chunk.title, chunk.url, chunk.published, chunk.source) == (
            "doc-1", "All about volcano", "https://x.example/volcano", "2026-10-01", "feed")
    assert chunks[0].text.startswith("Title: All about volcano\nPublished: 2026-10-01\n")
    assert len({c.chunk_id for c in chunks}) == len(chunks)


def test_chunk_text_is_the_original_with_whitespace_normalised():
    embedder = WordEmbedder()
    text = "First   sentence\there.  Second sentence follows.\n\n\n\nThird one ends it."
    (piece,) = chunk_text(text, embedder.token_spans, embedder.max_tokens)
    assert piece == "First sentence here. Second sentence follows.\n\nThird one ends it."


def test_windows_cover_the_text_in_order_and_progress():
    embedder = WordEmbedder()
    text = " ".join(f"w{n}." for n in range(101))
    windows = plan_windows(text, embedder.token_spans(text), 10, overlap=3)
    assert windows[0].first == 0 and windows[-1].last == 101
    for a, b in pairwise(windows):
        assert a.first < b.first < a.last <= b.last
        assert a.last - a.first <= 10


@pytest.mark.parametrize("which", ["fake", "minilm"])
def test_a_word_without_end_is_cut_into_bounded_chunks(which, minilm):
    # a line of 300,000 letters and no space is one token to both (WordPiece: one [UNK]): it was one
    # chunk of 300,000 characters, stored, returned by search and quoted whole
    embedder = WordEmbedder() if which == "fake" else minilm
    word = "q" * 300_000
    text = with_header("Endless", "2026-10-01", "https://x.example/endless",
                       f"The ferry leaves at noon from the eastern pier.\n\n{word}\n\nThe last ferry returns at six.")
    chunks = _chunks(text, embedder)
    limit = embedder.max_tokens * 100
    assert all(len(c.text) <= limit + 200 for c in chunks)  # the header and a sentence may join a piece
    assert sum(c.text.count("q") for c in chunks) >= len(word)  # every letter kept (pieces overlap)
    assert "eastern pier" in chunks[0].text and "returns at six" in chunks[-1].text


def test_each_chunk_carries_the_heading_of_its_section_and_embeds_its_text_alone():
    # (written for the test) a release note whose items do not name their release: the heading above them does
    notes = "\n\n".join([
        "* Noteworthy changes in release 2.4.0 (2026-01-02) [stable]",
        "** Bug fixes",
        *[f"The frob cache no longer loses entry number {n} when the disk is full." for n in range(12)],
        "* Noteworthy changes in release 2.3.0 (2025-06-01) [stable]",
        *[f"The knurl index keeps its order for key {n} across restarts." for n in range(12)],
    ])
    text = with_header("Frob NEWS", None, "file:///doc/frob/NEWS", notes)
    chunks = chunk_document(text, document_id="d", content_hash="h" * 64, embedder=WordEmbedder())
    by_heading = {c.heading for c in chunks}
    assert "Noteworthy changes in release 2.4.0 (2026-01-02) [stable] > Bug fixes" in by_heading
    assert "Noteworthy changes in release 2.3.0 (2025-06-01) [stable]" in by_heading
    for c in chunks:
        assert " > " not in c.text  # beside the text, never in what is embedded
        if "knurl" in c.text and "frob" not in c.text and "release" not in c.text:
            assert "2.3.0" in c.heading
        if "frob" in c.text and "knurl" not in c.text and "release" not in c.text:
            assert c.heading.endswith("> Bug fixes")
    assert [c.text for c in chunks] == [c.text for c in chunk_document(text, document_id="d", content_hash="h" * 64,
                                                                         embedder=WordEmbedder())]


def test_a_heading_is_a_short_line_standing_alone_not_a_sentence_item_or_lead_in():
    from services.indexer.chunking import heading_at, section_headings

    text = ("Frob 1.2 (2026-03-04)\n\nFixes:\n\n- Fix the cache.\n\nThe cache is kept for 30 days.\n\n"
            "Version 1.1\n-----------\n\nReleased 2025-01-01\n\nA short line\nwith a second line")
    titles = [t for _, _, t in section_headings(text)]
    assert titles == ["Frob 1.2 (2026-03-04)", "Version 1.1", "Released 2025-01-01"]
    assert heading_at(section_headings(text), text.index("The cache is kept")) == "Frob 1.2 (2026-03-04)"
    assert heading_at(section_headings(text), 0) == "Frob 1.2 (2026-03-04)"  # a chunk opening at its heading
    assert heading_at(section_headings("No heading here, a sentence."), 5) == ""


def test_a_command_line_or_an_address_standing_alone_is_no_heading():
    # (written for the test) a manual's example commands and a README's links stand alone as a heading would; a
    # release's notes open an item with the command it fixes. None names the section the text after it is in.
    from services.indexer.chunking import heading_at, section_headings

    text = ("Frob tools\n\nfrobctl --list 'knurl*'\n\nLists the knurls.\n\nfrobctl -v now prints the cache size\n\n"
            "frob dump | sort -u\n\nhttps://frob.example.org/docs/\n\nwww.frob.example.org\n\nKnurl cache\n\n"
            "The cache is kept for 30 days.")
    assert [t for _, _, t in section_headings(text)] == ["Frob tools", "Knurl cache"]
    assert heading_at(section_headings(text), text.index("Lists the knurls")) == "Frob tools"
    # a name with a hyphen, a version or a path is still a heading
    assert [t for _, _, t in section_headings("Frob-ng 2.3 - 2026-01-02\n\nThe knurl cache grew.\n\n"
                                              "/etc/frob.conf\n\nThe file is read at start.")] == [
        "Frob-ng 2.3 - 2026-01-02", "/etc/frob.conf"]


def test_a_heading_that_does_not_state_its_level_stands_under_the_one_it_belongs_to():
    from services.indexer.chunking import heading_at, section_headings

    # (written for the test) a Markdown changelog once cleaned: "## 2.3.0" and "### Added" are lines alike
    markdown = "2.3.0 - 2026-01-02\n\nAdded\n\n- A size limit.\n\n2.2.0 - 2025-06-01\n\nAdded\n\n- The frob cache.\n"
    heads = section_headings(markdown)
    assert heading_at(heads, markdown.index("- The frob cache")) == "2.2.0 - 2025-06-01 > Added"
    underlined = "Version 1.3\n-----------\n\nReleased 2013-07-03\n\n- Signals are weak.\n"
    assert heading_at(section_headings(underlined), underlined.index("- Signals")) == "Version 1.3 > Released 2013-07-03"
    outline = "* Version 2.5.4 - April 21, 2022\n- Fix the knurl cache\n- Faster frobs\n"
    assert heading_at(section_headings(outline), outline.index("- Faster")) == "Version 2.5.4 - April 21, 2022"


def test_a_document_of_many_short_headings_is_given_its_chunks_headings_in_linear_time():
    from services.indexer.chunking import headings_at, section_headings
    from tests.support import cpu_ratio

    # every chunk rebuilt the offsets' list and copied the headings before it: 1.9 MB of "Step N" lines took 16 s
    texts = {n: "".join(f"Step {i}\n\n" for i in range(n)) for n in (5000, 40000)}
    heads = {n: section_headings(texts[n]) for n in texts}

    def check(n, shown):
        assert shown[0] == "Step 0" and shown[-1].startswith("Step ")

    assert cpu_ratio(lambda n: headings_at(heads[n], range(0, len(texts[n]), 1500)), 5000, 40000, check=check) < 24


def test_blank_lines_of_spaces_are_read_past_in_linear_time():
    from services.indexer.chunking import section_headings
    from tests.support import cpu_ratio

    # the blocks' look-ahead took every later line of spaces too: 32,000 of them took a second
    blank = {n: "Title\n\n" + " \n" * n + "A sentence." for n in (2000, 16000)}

    def check(n, heads):
        assert [t for _, _, t in heads] == ["Title"]  # (the sentence is no heading)

    assert cpu_ratio(lambda n: section_headings(blank[n]), 2000, 16000, check=check) < 24
