"""``bench/followup_fresh.jsonl``: follow-up dialogues written apart from the follow-up rules (issue 36.4), over
documents of the development part (dev/a, dev/b, realdocs; never dev/d, never the sealed test part). It loads as
the eval loads a part's dialogues, and every key is in its document as the cleaner outputs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.tools.eval import conversations, realdocs, realtext
from tests.unit.test_realtext_set import _missing_keys, cleaned

pytestmark = pytest.mark.unit

SET = Path(__file__).resolve().parents[2] / "bench" / "followup_fresh.jsonl"
ALLOWED = {"a", "b", "realdocs"}  # the writer folders it may draw on


def _documents() -> dict[str, Path]:
    part = realtext.load_part("dev")
    return {d.file: d.folder / d.file for d in part.documents
            if (d.folder.parent.name if d.folder.name == "documents" else d.folder.name) in ALLOWED}


def test_the_fresh_dialogues_load_and_their_keys_are_in_the_cleaned_documents():
    files = _documents()
    dialogues = conversations.load_rows(realdocs.jsonl_lines(SET), files, corpora=(realtext.NAME,),
                                        max_turns=realtext.MAX_TURNS, topic_change_as_typed=False)
    assert sum(d.kind == conversations.FOLLOW_UP for d in dialogues) >= 30
    missing = {d.id: lost for d in dialogues if (lost := _missing_keys(list(d.keys), cleaned(files[d.file])))}
    assert not missing
