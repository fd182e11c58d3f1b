"""``bench/followup_fresh.jsonl``, ``followup_fresh2.jsonl``, ``followup_fresh3.jsonl`` and ``followup_fresh4.jsonl``: follow-up dialogues
written apart from the follow-up rules (issue 36.4; the second after a design was chosen on the first, to check it
on dialogues it was not chosen on; the third before the reader's handling of short and yes/no follow-ups was
designed, to choose between designs; the fourth before the rewrite's handling of pronouns for the earlier answer,
'what about' splices, 'And before 3.9?' and three-turn 'Is that the default?' was changed; the fifth before the follow-up module was shrunk and its rewrites of conditions
('And when X is not specified?'), 'then' and attributes asked of a default were changed; the sixth before the rewrite's handling of 'What is the default?' after an option, 'What does it return?' after 'Which function ...?' and attributes of a subject named in the earlier question was changed; the seventh, over documents the earlier six barely use, before the rewrite's handling of 'What does it return?' after 'Which method ...?', option and 'Which one' follow-ups and Spanish pro-drop was changed again; the eighth, over documents the earlier seven barely use (the Python general FAQ,
base-passwd, the Debian manifesto and history, less and gzip NEWS, isolating extensions, policy's operating system chapter,
French, Spanish and German FAQs and guides), before the rewrites of 'they' after 'Which Ns did X verb?' and the Spanish
pro-drop rule were changed), over documents of the development part (dev/a, dev/b, realdocs; never dev/d, never the sealed
test part); the ninth (``followup_fresh9.jsonl``), written before round 17 changed the rule, and the tenth
(``followup_fresh10.jsonl``, ids fr10a-/fr10b-: half b's questions and rewrites kept unread, but its
outcomes scored in a pipeline run at 2f57616 and compared across rule variants before round 18's design was frozen,
so it is no unseen check for 2f57616 or later), written before round 18 changed the rule, and the eleventh
(``followup_fresh11.jsonl``, ids fr11a-/fr11b-, ten documents: half b kept unrun until round 19's design was frozen), written
before round 19 changed the rule, and the twelfth (``followup_fresh12.jsonl``, ids fr12a-/fr12b-, six documents: half b
kept unrun until round 20's design was frozen), written before round 20 changed the rule, also over documents no set uses, named by the ``source`` each such row gives
(``/usr/share/doc``; a row whose file is not installed is left out, and the follow-ups expected counted without it). Each loads as the eval loads a part's dialogues, and every key is in its document as the cleaner
outputs it."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from shared.tools.eval import conversations, realdocs, realtext
from tests.unit.test_realtext_set import _missing_keys, cleaned

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"
ALLOWED = {"a", "b", "realdocs"}  # the writer folders it may draw on


def _documents() -> dict[str, Path]:
    part = realtext.load_part("dev")
    return {d.file: d.folder / d.file for d in part.documents
            if (d.folder.parent.name if d.folder.name == "documents" else d.folder.name) in ALLOWED}


# each set's follow-ups exactly as many as load: a dialogue lost in loading (its document renamed, a turn dropped) fails
@pytest.mark.parametrize(("name", "follow_ups"), [("followup_fresh.jsonl", 38), ("followup_fresh2.jsonl", 16),
                                                         ("followup_fresh3.jsonl", 31),
                                                         ("followup_fresh4.jsonl", 30),
                                                         ("followup_fresh5.jsonl", 20),
                                                         ("followup_fresh6.jsonl", 25),
                                                         ("followup_fresh7.jsonl", 30),
                                                         ("followup_fresh8.jsonl", 35),
                                                         ("followup_fresh9.jsonl", 38),
                                                         ("followup_fresh10.jsonl", 38),
                                                         ("followup_fresh11.jsonl", 53),
                                                         ("followup_fresh12.jsonl", 35)])
def test_the_fresh_dialogues_load_and_their_keys_are_in_the_cleaned_documents(name, follow_ups, tmp_path):
    files, kept = _documents(), []
    for line in (BENCH / name).read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else None
        source = Path(row.get("source", "/nonexistent")) if row else None
        if row and row["file"] not in files and not source.is_file():
            # a document no set uses and this machine lacks: that row alone is left out, the others still checked
            follow_ups -= row.get("kind") == conversations.FOLLOW_UP
            continue
        if row and row["file"] not in files:  # a document no set uses, copied (unpacked) under the name the row gives
            with (gzip.open if source.suffix == ".gz" else open)(source, "rb") as raw, open(tmp_path / row["file"], "wb") as out:
                shutil.copyfileobj(raw, out)
            files[row["file"]] = tmp_path / row["file"]
        kept.append(line)
    if not any(line.strip() for line in kept):
        pytest.skip(f"no document of {name} is installed here")
    (tmp_path / name).write_text("\n".join(kept) + "\n", encoding="utf-8")
    dialogues = conversations.load_rows(realdocs.jsonl_lines(tmp_path / name), files, corpora=(realtext.NAME,),
                                        max_turns=realtext.MAX_TURNS, topic_change_as_typed=False)
    assert sum(d.kind == conversations.FOLLOW_UP for d in dialogues) == follow_ups
    missing = {d.id: lost for d in dialogues if (lost := _missing_keys(list(d.keys), cleaned(files[d.file])))}
    assert not missing
