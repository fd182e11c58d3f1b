"""The note a caveat opens with (issue 36 item 2): it says what the reader found and what it did not,
from the evidence it measured, in the question's language; notes written before (one generic sentence)
are still recognised wherever notes are. The findings and passages are written for these tests."""

from __future__ import annotations

import numpy as np
import pytest

from shared.contract.ports import Answer, AnswerSentence, Finding, NumberedContext
from shared.query.reading.answer_types import sentence_states
from shared.query.reading.caveat import caveat_note
from shared.query.reading.extractive import extractive_answer, question_runs, term_set
from shared.query.reading.followup import answer_paragraphs
from shared.query.reading.language import CAVEAT_NOTES, SUPPORTED, fixed_notes, is_note, phrase
from shared.query.reading.verdict import FEATURES, Logistic, VerdictModel
from tests.unit.loop_fakes import HashingEmbedder

pytestmark = pytest.mark.unit

GID = "Which GID must the tty group have on systemd systems?"


def _answer(finding: Finding | None, language: str = "en", quoted: str = "The tty group owns the terminals.") -> Answer:
    return Answer(text=f"{quoted} [1]", sentences=[AnswerSentence(quoted, [1])], language=language, states_fact=False,
                  finding=finding)


# ------------------------------------------------------------ what the note says


def test_a_value_no_sentence_states_is_named_with_the_subject_found():
    finding = Finding(found=("tty group", "systemd systems"), missing=("GID",), asks="value", stated=False)
    assert caveat_note(GID, _answer(finding), "en") == (
        "Note: the sources mention “tty group” and “systemd systems”, but I found no sentence stating the GID; "
        "the closest passages are quoted below.")


@pytest.mark.parametrize("question, asked", [
    ("Which status code does a server send when a feed has not changed?", "the status code"),
    ("In which version was the --foo option removed?", "the version"),
    ("What is the default value of k1 in BM25?", "the default value"),
    ("How many dimensions does the model produce?", "the number of dimensions"),
    ("When was the frob daemon first released?", "a date"),
])
def test_the_asked_value_is_named_in_the_question_s_words_or_by_its_kind(question, asked):
    note = caveat_note(question, _answer(Finding(found=("frob",), asks="value", stated=False)), "en")
    assert f"I found no sentence stating {asked};" in note


def test_a_list_whose_items_are_not_quoted_is_named():
    finding = Finding(found=("conditional requests",), asks="list", stated=False)
    assert caveat_note("Which request headers make conditional requests possible?", _answer(finding), "en") == (
        "Note: the sources mention “conditional requests”, but I found no sentence listing the request headers; "
        "the closest passages are quoted below.")


@pytest.mark.parametrize("question, listing", [
    ("What are the limits on match distance in deflate?", "listing the limits;"),
    ("In which two ways can users run multiple interpreters?", "listing the two ways;"),
    ("Which positions did Ian Murdock hold after Debian?", "listing the positions;"),
    # "lists" is the verb here, and "all files" what it lists: no phrase names the asked items, none is named
    ("Which command lists all files of an installed package?", None),
    # a verb of the lexicon's function words ends the phrase: "the configure option makes", "the two does" named a verb
    ("Which configure option makes make keep going after an error?", None),
    ("Which of the two does the zap tool use by default?", None),
    ("Which zap options does the wrapper script pass?", "listing the zap options;"),
])
def test_the_asked_items_are_named_only_where_the_question_names_them(question, listing):
    note = caveat_note(question, _answer(Finding(found=("Debian",), asks="list", stated=False)), "en")
    assert (listing in note) if listing else note.startswith("Note: the quoted passages mention “Debian”, but I am")


def test_a_name_no_quoted_passage_holds_comes_before_the_value():
    # the sources describe the nobody user's group, not the user the question names
    finding = Finding(found=("UID", "user"), missing=("ProTab X1",), unquoted=("nobody",), asks="value", stated=False)
    assert caveat_note("What UID does the ProTab X1 use?", _answer(finding), "en") == (
        "Note: the quoted passages mention “UID” and “user” but not “ProTab X1”; "
        "they may not answer the whole question.")


def test_a_stated_value_leaves_the_question_s_other_words_the_passages_lack():
    finding = Finding(found=("UID", "user"), unquoted=("nobody",), asks="value", stated=True)
    assert caveat_note("What is the UID of the nobody user?", _answer(finding), "en") == (
        "Note: the quoted passages mention “UID” and “user” but not “nobody”; they may not answer the whole question.")


def test_what_is_found_alone_is_said_with_the_doubt_the_verdict_has():
    finding = Finding(found=("BM25 saturate term frequency",))
    assert caveat_note("How does BM25 saturate term frequency?", _answer(finding), "en") == (
        "Note: the quoted passages mention “BM25 saturate term frequency”, but I am not sure they answer the "
        "question as asked.")


def test_what_is_missing_alone_is_said_when_nothing_is_found():
    finding = Finding(missing=("ProTab X1",))
    assert caveat_note("What does the ProTab X1 weigh?", _answer(finding), "en") == (
        "Note: the quoted passages do not mention “ProTab X1”; they may not answer the question.")


@pytest.mark.parametrize("finding", [None, Finding()])
def test_no_evidence_gives_the_generic_note(finding):
    # a generative model's answer carries no finding; a finding of nothing says nothing specific
    assert caveat_note(GID, _answer(finding), "de") == phrase("caveat", "de")
    assert caveat_note(GID, None, "en") == phrase("caveat", "en")


# (question, a quoted sentence in its language)
IN_EACH_LANGUAGE = {
    "en": ("Which GID does the tty group have?", "The tty group owns the terminals."),
    "es": ("¿Qué GID tiene el grupo tty?", "El grupo tty es el dueño de los terminales."),
    "fr": ("Quel GID a le groupe tty ?", "Le groupe tty est le propriétaire des terminaux."),
    "de": ("Welche GID hat die Gruppe tty?", "Die Gruppe tty ist die Eigentümerin der Terminals und der Geräte."),
    "pt": ("Qual GID tem o grupo tty?", "O grupo tty é o dono dos terminais e não dos discos."),
    "it": ("Quale GID ha il gruppo tty?", "Il gruppo tty è il proprietario dei terminali e della console."),
    "ja": ("tty グループの GID は何ですか？", "tty グループは端末を所有します。"),
    "zh": ("tty 组的 GID 是多少？", "tty 组拥有终端设备。"),
    "ko": ("tty 그룹의 GID 는 무엇입니까?", "tty 그룹은 터미널을 소유합니다."),
    "ru": ("Какой GID у группы tty?", "Группа tty владеет терминалами."),
}


@pytest.mark.parametrize("language", SUPPORTED)
def test_each_language_has_its_own_note_naming_what_was_found_and_missing(language):
    question, quoted = IN_EACH_LANGUAGE[language]
    missing = caveat_note(question, _answer(Finding(found=("tty",), unquoted=("GID",)), language, quoted), language)
    unsure = caveat_note(question, _answer(Finding(found=("tty",)), language, quoted), language)
    for note in (missing, unsure):
        assert "tty" in note and "{" not in note and "None" not in note
        assert is_note(note) and answer_paragraphs(f"{note}\n\nThe tty group has GID 5. [1]") == [
            "The tty group has GID 5. [1]"]
    assert "GID" in missing and "GID" not in unsure
    if language != "en":
        english = IN_EACH_LANGUAGE["en"]
        assert missing != caveat_note(english[0], _answer(Finding(found=("tty",), unquoted=("GID",))), "en")


def test_another_language_over_english_text_names_only_its_own_words_found():
    # a German question is read by its English terms ("tty group", "length"): the note names the words the question
    # writes itself, and nothing the English passages lack (they lack every German word)
    finding = Finding(found=("tty group",), unquoted=("length",))
    note = caveat_note("Welche GID hat die Gruppe tty?", _answer(finding, "de"), "de")
    assert note == ("Hinweis: Die zitierten Stellen erwähnen „tty“, aber ich bin nicht sicher, dass sie die Frage "
                    "so beantworten, wie sie gestellt ist.")


# ------------------------------------------------------------ notes recognised, old and new


@pytest.mark.parametrize("language", SUPPORTED)
def test_the_old_generic_notes_are_still_recognised(language):
    old = phrase("caveat", language)
    assert old in fixed_notes() and is_note(old)
    assert answer_paragraphs(f"{old}\n\nThe Editors field lists who may edit. [1]") == [
        "The Editors field lists who may edit. [1]"]


def test_a_document_s_own_note_quoted_is_content():
    quoted = "Note: the quoted passages mention “tty” but not “gid”; they may not answer the whole question. [1]"
    assert not is_note(quoted) and not is_note("Note: the Editors field is optional. [1]")


@pytest.mark.parametrize("key", CAVEAT_NOTES)
def test_every_note_built_from_evidence_is_recognised_whatever_it_names(key):
    note = phrase(key, "en").format(found="“a”, “b” and “c”", asked="the GID", missing="“d”", condition="-q")
    assert note.startswith("Note: ") and is_note(note) and not is_note(f"{note} [2]")


# ------------------------------------------------------------ what the reader measures


def test_the_question_s_words_are_split_into_runs_held_and_lacking():
    held = frozenset(term_set("The tty group is used on systemd systems; mailboxes in /var/mail."))
    assert question_runs(GID, held) == (("tty group", "systemd systems"), ("GID",))
    assert question_runs("Which group owns /var/mail?", held) == (("group", "/var/mail"), ("owns",))
    # the words that ask are not what is asked about
    assert question_runs("How many dimensions does the model produce?", frozenset()) == (
        (), ("dimensions", "model produce"))


@pytest.mark.parametrize("question, runs", [
    # a preposition before the asking word asks too; "how many" anywhere asks, it is not asked about
    ("Since which Ninja version is the cleandead tool available?", (("Ninja",), ("version", "cleandead tool available"))),
    ("What is the Check ID of SHA-256, and how many bytes does it take?", ((), ("Check ID", "SHA-256", "bytes", "take"))),
    # a run a longer one holds is not named again
    ("What is in the README of the zstd README?", ((), ("zstd README",))),
])
def test_the_words_that_ask_and_repeated_runs_are_not_named(question, runs):
    assert question_runs(question, frozenset(term_set("Ninja"))) == runs


_ZERO = np.zeros(len(FEATURES))
# a verdict that is never sure: every answer a caveat, so what it found is what the note says
NEVER_SURE = VerdictModel(Logistic(_ZERO, np.ones(len(FEATURES)), _ZERO, -20.0),
                          Logistic(_ZERO, np.ones(len(FEATURES)), _ZERO, -20.0), 0.5, 0.5)


def test_the_reader_s_answer_carries_what_it_found_and_what_it_did_not():
    embedder = HashingEmbedder()
    passage = ("Terminals\n\nThe tty group owns the terminal devices on systemd systems. "
               "Members of the tty group may write to other users' terminals.")
    contexts = [NumberedContext(number=1, source="doc1", text=passage)]
    answer = extractive_answer(GID, contexts, context_similarity={1: 0.6},
                               question_vector=embedder.embed([GID])[0], sentence_embed=embedder.embed,
                               fact_check=sentence_states, verdict=NEVER_SURE)
    assert answer.states_fact is False and answer.finding is not None
    assert answer.finding.found == ("tty group", "systemd systems") and answer.finding.missing == ("GID",)
    assert answer.finding.asks == "value" and answer.finding.stated is False
    assert caveat_note(GID, answer, "en") == (
        "Note: the sources mention “tty group” and “systemd systems”, but I found no sentence stating the GID; "
        "the closest passages are quoted below.")


def test_the_cited_source_s_name_counts_and_only_words_no_source_holds_are_said_unsaid():
    embedder = HashingEmbedder()
    question = "What is the default quality of cjpeg for progressive baseline files?"
    contexts = [NumberedContext(number=1, source="file:///usr/share/man/man1/cjpeg.1",
                                text="-quality N Scale quantization tables to adjust image quality. "
                                     "Quality is 0 (worst) to 100 (best); the default is 75."),
                NumberedContext(number=2, source="file:///usr/share/doc/djpeg.txt",
                                text="djpeg writes baseline files only when asked.")]
    answer = extractive_answer(question, contexts, context_similarity={1: 0.6, 2: 0.3},
                               question_vector=embedder.embed([question])[0], sentence_embed=embedder.embed,
                               fact_check=sentence_states, verdict=NEVER_SURE)
    assert [s.citations for s in answer.sentences] == [[1]]
    # the citation shows cjpeg.1: the answer names cjpeg; "baseline" is in a passage not quoted, "progressive" in none
    assert "cjpeg" in answer.finding.found and "default quality" in answer.finding.found
    assert answer.finding.unquoted == ("progressive",)


def test_a_name_the_answer_says_no_source_names_is_not_found_whatever_the_cited_file_is_called():
    embedder = HashingEmbedder()
    question = "What compression ratio did zlib reach in the Acme Zstd benchmark?"
    contexts = [NumberedContext(number=1, source="file:///docs/Acme-Zstd-benchmarks.md",
                                text="Benchmarks\n\nzlib reached a compression ratio of 2.743 at level 1.")]
    answer = extractive_answer(question, contexts, context_similarity={1: 0.6}, names=("Acme", "Zstd"),
                               question_vector=embedder.embed([question])[0], sentence_embed=embedder.embed,
                               fact_check=sentence_states, verdict=NEVER_SURE)
    assert answer.text.endswith("Not mentioned in the sources: Acme Zstd.")
    # the body and the note tell one story: the name is missing, not found in the file's name
    assert answer.finding.missing == ("Acme Zstd",) and not any("Acme" in run for run in answer.finding.found)


def test_a_word_cut_short_at_an_accent_is_not_the_question_s_word():
    # "conseillé" read by an ASCII pattern is "conseill": not a word the question writes
    quoted = "Il est conseillé de garder la version amont courte et de ne pas la changer."
    finding = Finding(found=("conseill", "version amont"))
    note = caveat_note("Sous quelle longueur est-il conseillé de garder la version amont ?",
                       _answer(finding, "fr", quoted), "fr")
    assert note.startswith("Remarque : les passages cités mentionnent « version » et « amont », mais je ne suis pas")


def test_a_term_from_a_long_question_is_quoted_in_a_few_words():
    """What the note quotes from the question is bounded, cut at a word with an ellipsis: a 1,809-character
    question gave a 1,889-character note (found by newcomer8)."""
    run = " ".join(f"lantern{i}" for i in range(200))
    question = f"Which GID must the {run} have?"
    finding = Finding(found=(run, "tty group"), missing=(run,), asks="value", stated=False)
    note = caveat_note(question, _answer(finding), "en")
    assert note == ("Note: the quoted passages mention “lantern0 lantern1 lantern2 lantern3…” and “tty group” "
                    "but not “lantern0 lantern1 lantern2 lantern3…”; they may not answer the whole question.")
    word = "x" * 500  # one word longer than the bound is cut too
    note = caveat_note(f"Which GID must {word} have?", _answer(Finding(found=(word,), asks="value")), "en")
    assert len(note) < 200 and "x" * 40 + "…" in note, note


def test_a_quoted_value_the_reader_could_not_tie_to_the_question_is_not_denied():
    """The note does not say "no sentence stating" what the quote holds: xargs's "Run up to max-procs processes at a
    time; the default is 1" was noted "I found no sentence stating the number of processes" (found by newcomer8)."""
    question = "How many lamps does the wick daemon light at a time by default?"
    quoted = "Light up to max-lamps lamps at a time; the default is 4."
    assert sentence_states(quoted, question) is False  # the reader's strict reading: the decision it leads to stays
    finding = Finding(found=("lamps", "wick daemon"), asks="value", stated=False)
    note = caveat_note(question, _answer(finding, quoted=quoted), "en")
    assert note == ("Note: the sources mention “lamps” and “wick daemon”, but I could not confirm which quoted value is "
                    "the number of lamps; the closest passages are quoted below."), note
    assert is_note(note)
    # a quote holding no count still says no sentence states one
    note = caveat_note(question, _answer(finding, quoted="The wick daemon lights lamps."), "en")
    assert "I found no sentence stating the number of lamps" in note
