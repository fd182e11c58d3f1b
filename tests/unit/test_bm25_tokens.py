"""What BM25 reads of a text (shared.adapters.local.scoring.bm25_tokens): words of two or more characters,
stop words out, plurals folded, and a version or dotted number as one term of its own."""

from __future__ import annotations

import numpy as np

from shared.adapters.local.index import HybridIndex
from shared.adapters.local.scoring import bm25_tokens
from shared.contract.ports import Chunk


def test_a_dotted_number_is_a_term_of_its_own_beside_the_words_it_held():
    # "3.7" held no word of two characters: a question asking for release 3.7 had no term for it
    assert "3.7" in bm25_tokens("Noteworthy changes in release 3.7 (2021-08-14) [stable]")
    assert {"4.9.0", "2.6.32", "32"} <= set(bm25_tokens("findutils 4.9.0 on Linux 2.6.32"))
    assert bm25_tokens("When was grep 3.7 released?") == ["when", "grep", "3.7", "released"]


def test_a_number_inside_a_name_or_ending_a_sentence_is_not_cut_out():
    assert bm25_tokens("python3.11 and v2.1") == ["python3", "11", "v2"]
    assert bm25_tokens("It came with 9.1.") == ["came", "9.1"]


def test_words_stop_words_and_plurals_as_before():
    assert bm25_tokens("The Glaciers and their policies, Lasers, status!") == ["glacier", "policy", "laser", "status"]


def test_the_release_asked_for_by_its_number_ranks_first(tmp_path):
    releases = [f"Noteworthy changes in release {v} ({d}) [stable]\n\nBug fixes: the program no longer crashes."
                for v, d in (("3.8", "2022-09-02"), ("3.7", "2021-08-14"), ("3.6", "2020-11-08"))]
    index = HybridIndex(tmp_path, 4)
    for n, text in enumerate(releases):
        index.upsert(f"d{n}", [Chunk(chunk_id=f"d{n}:c", document_id=f"d{n}", ordinal=0, text=text, title="NEWS")],
                     np.ones((1, 4), dtype=np.float32) / 2)
    hits = index.search("When was grep 3.7 released?", np.ones(4, dtype=np.float32) / 2, 3, mode="bm25")
    assert hits and hits[0].chunk.document_id == "d1"
    index.close()


def test_a_command_line_option_is_a_term_as_written():
    # "-9" held no word of two characters and "-N" was "n", dropped: gzip's "-9" question ranked "-N --name" first
    assert bm25_tokens("-N --name and -9 or --best") == ["name", "best", "-N", "--name", "-9", "--best"]
    assert "-n" not in bm25_tokens("-N --name") and "-N" not in bm25_tokens("-n --no-name")
    assert bm25_tokens("a well-known e-mail, 2021-08-14 and x-1") == ["well", "known", "mail", "2021", "08", "14"]


def _option_index(tmp_path):
    entries = {"name": "-N --name\n\nAlways save the original file name when compressing.",
               "no-name": "-n --no-name\n\nDo not save the original file name when compressing.",
               "best": "-# --fast --best\n\nThe -9 or --best option gives the slowest compression of the file."}
    index = HybridIndex(tmp_path, 4)
    for name, text in entries.items():
        index.upsert(name, [Chunk(chunk_id=f"{name}:c", document_id=name, ordinal=0, text=text, title="zip(1)")],
                     np.ones((1, 4), dtype=np.float32) / 2)
    return index


def test_the_option_asked_for_ranks_first_and_its_case_counts(tmp_path):
    index = _option_index(tmp_path)
    for question, entry in (("What does the -9 option do to the file?", "best"),
                            ("What does -N do when compressing?", "name"), ("What does -n do when compressing?", "no-name")):
        hits = index.search(question, np.ones(4, dtype=np.float32) / 2, 3, mode="bm25")
        assert hits[0].chunk.document_id == entry, question
    index.close()


def test_an_index_built_before_options_were_terms_still_answers(tmp_path, monkeypatch):
    import shared.adapters.local.index as index_module

    # its postings hold no option terms (the index tokenises what it stores; the query is read as now)
    monkeypatch.setattr(index_module, "bm25_tokens", lambda text: [t for t in bm25_tokens(text) if t[0] != "-"])
    index = _option_index(tmp_path)
    hits = index.search("What does --best do?", np.ones(4, dtype=np.float32) / 2, 3, mode="bm25")
    assert hits and hits[0].chunk.document_id == "best"
    index.close()
