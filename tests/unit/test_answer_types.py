"""Abstention on near misses (issue 11.1): the contexts must hold the *asked* fact.

Every example is written for these tests: a near miss names the question's entity
and never states the asked price, year, headcount, ingredient, cause or mechanism;
its counterpart adds the one sentence that does. Each pair fails if its rule breaks.
"""

from __future__ import annotations

import pytest

from shared.adapters.local.llm import LocalLanguageModel
from shared.contract.ports import NumberedContext
from shared.query.reading.answer_types import (
    AMOUNT,
    COUNT,
    DATE,
    FLAG,
    LOCATION,
    NAME,
    QUANTITY,
    VERSION,
    asked_fact,
    asked_subject,
    fact_support,
    holds_value,
    sentence_states,
)
from shared.query.reading.extractive import term_set
from tests.support import cpu_ratio
from tests.unit.loop_fakes import HashingEmbedder, MemoryIndex, chunk, stating_verdict

pytestmark = pytest.mark.unit

AURORA = [
    "The Aurora Plus subscription includes offline playback, four profiles and lossless audio.",
    "Aurora launched the Plus plan in Norway and Sweden before the rest of Europe.",
]
HALVORSEN = [
    "The Halvorsen Bridge spans the Lågen river with a 300-metre steel arch.",
    "The Halvorsen Bridge carries two lanes of traffic and a cycle path.",
]
BRIGHTWATER = [
    "Brightwater Analytics builds demand-forecasting software for grocery retailers.",
    "Brightwater Analytics was founded in 2011 and is headquartered in Leeds.",
]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How much does the Aurora Plus subscription cost?", AMOUNT),
        ("What is the price of the Aurora Plus plan?", AMOUNT),
        ("How many employees does Brightwater Analytics have?", COUNT),
        ("When was the Halvorsen Bridge opened?", DATE),
        ("In which year did the Halvorsen Bridge open?", DATE),
        ("Who founded Brightwater Analytics?", NAME),
        ("What is the top speed of the Kestrel K2 drone?", QUANTITY),
        ("What percentage of Aurora subscribers pay yearly?", QUANTITY),
    ],
)
def test_the_question_shape_names_the_value_type_an_answer_needs(question, kind):
    assert asked_fact(question).kind == kind


def test_a_conditional_when_is_not_a_date_question():
    assert asked_fact("When is exact search good enough?").kind is None
    assert asked_fact("When will the Halvorsen Bridge reopen?").kind == DATE


@pytest.mark.parametrize(
    "question",
    ["Is remote work more productive than office work?", "Should we adopt hybrid search?", "Wie viel kostet das?"],
)
def test_open_yes_no_and_foreign_questions_are_not_checked(question):
    fact = asked_fact(question)
    assert not fact.checkable
    assert fact_support(question, AURORA).checked is False
    assert fact_support(question, AURORA).supported  # unchecked never counts against answering


def test_a_price_the_contexts_do_not_state_is_a_near_miss():
    question = "How much does the Aurora Plus subscription cost?"
    miss = fact_support(question, AURORA)
    assert miss.checked and not miss.supported and miss.near_miss
    assert "amount" in miss.missing[0]
    hit = fact_support(question, [*AURORA, "The Aurora Plus subscription costs 129 NOK or $12.99 a month."])
    assert hit.supported and "$12.99" in hit.sentence


def test_a_year_the_contexts_do_not_state_is_a_near_miss():
    question = "When was the Halvorsen Bridge opened?"
    assert not fact_support(question, HALVORSEN).supported
    assert fact_support(question, [*HALVORSEN, "The Halvorsen Bridge opened to traffic in May 1987."]).supported


def test_a_headcount_needs_a_count_not_a_year():
    question = "How many employees does Brightwater Analytics have?"
    # The founding year is a number, but not a count of anything the question asks about.
    assert not fact_support(question, BRIGHTWATER).supported
    assert fact_support(question, [*BRIGHTWATER, "Brightwater Analytics employs 1,240 people in four offices."]).supported
    assert fact_support(question, [*BRIGHTWATER, "Brightwater Analytics employs about two hundred staff."]).supported


def test_a_measurement_is_no_count_of_something_else():
    question = "How many calories are in a serving of Corliss oat granola?"
    sizes = ["Corliss oat granola is made with rolled oats and honey. It is sold in 12-ounce and 24-ounce bags, "
             "and a bag keeps for 6 months."]
    # The numbers measure weights and a shelf life; none counts calories, so the asked fact is missing.
    assert fact_support(question, sizes).near_miss
    assert fact_support(question, [*sizes, "A serving of Corliss oat granola has 190 calories."]).supported
    # Counted in the unit the question asks about, a measurement is the answer.
    assert fact_support("How many months does Corliss oat granola keep?", sizes).supported
    assert holds_value("About 40 people attended.", COUNT) and not holds_value("It weighs 40 kg.", COUNT)


def test_a_value_about_another_entity_does_not_count():
    question = "What is the tuition at Ardmore College?"
    other = ["Tuition at Pellham University is $41,200 per year for undergraduates.",
             "Ardmore College offers forty degree programmes on its riverside campus."]
    assert not fact_support(question, other).supported
    assert fact_support(question, [*other, "Ardmore College tuition is $28,900 per year."]).supported


def test_a_quantity_stated_in_its_unit_counts_without_naming_the_attribute():
    question = "What is the load capacity of the Ridgemoor footbridge?"
    assert not fact_support(question, ["The Ridgemoor footbridge was repainted green in the spring."]).supported
    assert fact_support(question, ["The Ridgemoor footbridge is rated for 12 tons of distributed load."]).supported


def test_a_name_must_be_one_the_question_does_not_already_hold():
    question = "Who founded Marlowe Labs?"
    assert not fact_support(question, ["Marlowe Labs makes air-quality sensors for schools."]).supported
    assert fact_support(question, ["Marlowe Labs was founded by Ingrid Solberg after she left the university."]).supported


def test_an_asked_aspect_no_passage_names_weakens_but_does_not_refuse():
    question = "What are the ingredients of Verdane cleaning spray?"
    awards = ["Verdane cleaning spray won a consumer award for streak-free results.",
              "Verdane cleaning spray is sold in three bottle sizes."]
    miss = fact_support(question, awards)
    assert miss.checked and not miss.supported and not miss.near_miss
    assert fact_support(question, [*awards, "The ingredients of Verdane cleaning spray are citric acid and "
                                            "a plant-based surfactant."]).supported


def test_a_value_of_another_edition_or_model_does_not_count():
    assert not fact_support("Who won the 2024 Harbour Regatta?",
                            ["The Sandvik crew won the 2022 Harbour Regatta in record time."]).supported
    assert fact_support("Who won the 2024 Harbour Regatta?",
                        ["The Sandvik crew won the 2024 Harbour Regatta in record time."]).supported
    assert not fact_support("What is the range of the Corvo Model Y?",
                            ["The Corvo Model 3 has a range of 410 km on one charge."]).supported


def test_a_cause_question_without_a_causal_sentence_is_weakened_not_refused():
    question = "What causes Harlow syndrome?"
    symptoms = ["Harlow syndrome brings joint pain and fatigue in adults.",
                "Harlow syndrome is treated with physiotherapy and rest."]
    miss = fact_support(question, symptoms)
    assert not miss.supported and not miss.near_miss
    assert fact_support(question, [*symptoms, "Harlow syndrome is caused by a mutation in the COL7 gene."]).supported


def test_a_how_does_it_work_question_without_a_mechanism_is_weakened_not_refused():
    question = "How does the Kestrel water filter work?"
    sales = ["The Kestrel water filter is sold in thirty countries.",
             "Reviewers praised the Kestrel water filter's lead results and its price."]
    miss = fact_support(question, sales)
    assert not miss.supported and not miss.near_miss
    assert fact_support(question, [*sales, "The Kestrel filter removes lead through an ion-exchange resin bed."]).supported


def test_a_default_stated_of_a_named_thing_counts():
    # "default <noun> of the quux client is": the old pattern allowed one word between the noun and "is"
    assert holds_value("The default timeout of the quux client is 30 seconds.", "default")
    assert holds_value("The default port for the relay daemon is 8025.", "default")
    assert not holds_value("The default timeout of the quux client was raised last year.", "default")
    assert not holds_value("It overrides the default value specified in the file.", "default")


def test_values_are_recognised_by_type():
    assert holds_value("It costs €45 per seat.", AMOUNT)
    assert holds_value("The fee is 2.5% of the loan.", AMOUNT)
    assert not holds_value("It is popular with small teams.", AMOUNT)
    assert holds_value("It opened in March.", DATE) and holds_value("Built in the 14th century.", DATE)
    assert not holds_value("It opened to great acclaim.", DATE)
    assert holds_value("About 300 people attended.", COUNT)
    assert asked_fact("What is the EXACT tuition at Ardmore College?").specifics == ("Ardmore", "College")
    assert not holds_value("It was founded in 2011.", COUNT)


# ------------------------------------------------------------- the local grader


class CountingIndex(MemoryIndex):
    """The fake index, also telling how many chunks hold a term (as the real index does)."""

    def document_frequency(self, terms):
        from shared.query.reading.extractive import stem, term_set

        sets = [term_set(c.text) for c in self.chunks]
        return {t: sum(stem(t) in s for s in sets) for t in terms}


def _model(verdict=None):
    embedder = HashingEmbedder()
    corpus = [chunk(n, f"doc {n}", text) for n, text in enumerate([
        *AURORA, *HALVORSEN, *BRIGHTWATER,
        "BM25 ranks documents by term frequency with saturation and inverse document frequency.",
        "Hybrid search merges keyword and vector rankings; consumers of the search API can rebalance weights.",
        "Reciprocal rank fusion sums one over sixty plus the rank of each document across the result lists.",
    ])]
    return LocalLanguageModel(index=CountingIndex(embedder, corpus), embedder=embedder, verdict_model=verdict)


def _contexts(*texts):
    return [NumberedContext(number=n, source=f"s{n}", text=t) for n, t in enumerate(texts, start=1)]


def test_the_local_grader_abstains_on_a_near_miss_and_answers_when_the_fact_is_there():
    # the fitted grade refuses the near miss, and the reader's verdict (here one that refuses an unstated value)
    # does not overrule it; with the price stated, the reader answers (the grade defers to it)
    llm = _model(stating_verdict())
    question = "How much does the Aurora Plus subscription cost?"
    miss = llm.grade(question, _contexts(*AURORA))
    assert not miss.answerable and not miss.grounded
    assert "no sentence states the asked amount" in miss.reasoning
    hit = llm.grade(question, _contexts(*AURORA, "The Aurora Plus subscription costs $12.99 a month."))
    assert hit.answerable
    assert hit.score > miss.score  # the near miss also grades lower, which is what calibration ranks by


def test_an_off_topic_question_sharing_vocabulary_is_refused():
    llm = _model()
    # "consumers", "rebalance" and "search" occur in the corpus; Kafka, the question's only name, never does.
    contexts = _contexts(
        "Hybrid search merges keyword and vector rankings; consumers of the search API can rebalance weights.",
        "Reciprocal rank fusion sums one over sixty plus the rank of each document across the result lists.")
    grade = llm.grade("What triggers a consumer group rebalance in Kafka?", contexts)
    assert not grade.answerable and "the corpus never mentions Kafka" in grade.reasoning
    # The same vocabulary without the unknown name is graded on its merits (the fitted model decides
    # whether that is enough; this test's hashing embedder is not the one it was fit on), not refused.
    merits = llm.grade("What triggers a rebalance of search weights?", contexts)
    assert "never mentions" not in merits.reasoning and merits.score > grade.score
    # One unknown name beside a known one is not enough ("Aurora Nordic" names Aurora).
    assert "never mentions" not in llm.grade("What plans does Aurora Nordic sell?", _contexts(*AURORA)).reasoning


def test_the_model_grader_is_asked_for_the_asked_fact_not_the_topic():
    from shared.query.prompts import grade_prompt

    prompt = grade_prompt("How much does the Aurora Plus subscription cost?", _contexts(*AURORA))
    # A model told "answerable = false only when the subject is not covered at all" answers near misses.
    assert "does not cover this subject at all" not in prompt
    assert "near miss" in prompt and "asked fact" in prompt
    assert "grounded (true/false): is the asked fact itself stated" in prompt


def test_every_supporting_sentence_is_counted():
    question = "How much does the Aurora Plus subscription cost?"
    assert fact_support(question, AURORA).supporting == 0
    two = fact_support(question, [*AURORA, "The Aurora Plus subscription costs $12.99 a month.",
                                  "Billed yearly, the Aurora Plus subscription costs $129."])
    assert two.supporting == 2 and "$12.99" in two.sentence  # the first one found is quoted


def test_a_status_code_is_asked_only_when_the_question_asks_for_one():
    # issue 36: a follow-up carrying its earlier turn's subject ("the status code a server sends ...") asks for
    # what its own opening names, the headers; read as asking a status code, a sentence stating 304 won
    assert asked_fact("Which status code does a server send when a polled feed has not changed?").kind == "status code"
    assert asked_fact("What is the status code for a missing page?").kind == "status code"
    follow_up = "Which request headers make the status code a server sends when a polled feed has not changed possible?"
    assert asked_fact(follow_up).kind != "status code"
    assert sentence_states("The server replies 304 Not Modified with no body.", follow_up) is not True


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        # a which/what question opening with a noun asks for one of what that noun names, whatever else it names
        ("Which options does version 2 of the packer add?", "flag"),
        ("Which GNU frob option randomises the order of the jobs?", "flag"),
        ("What uid does the backup user have on Debian?", "identifier"),
        ("Which GID must the tty group have?", "identifier"),
        ("Which exit code must a maintainer script return to be retried?", "identifier"),
        ("Since which frob version is the sandbox enabled?", "version"),
        ("Which request headers make the status code a server sends possible?", None),
        # what the question is about, not what it asks for
        ("What does the --quiet option do?", None),
        ("What did version 1.1.0 of the format add?", None),
        # no noun opening: the kinds are read from the rest of the question as before
        ("What is the status code for a missing page?", "status code"),
        ("What is the option that turns colours off?", "flag"),
    ],
)
def test_a_which_question_asks_for_its_own_noun(question, kind):
    assert asked_fact(question).kind == kind


def test_a_uid_is_stated_by_a_number_tied_to_its_user():
    question = "What uid does the backup user have?"
    assert sentence_states("The backup user has uid 34 on every Debian system.", question)
    assert not sentence_states("The backup user runs the nightly backup scripts.", question)


@pytest.mark.parametrize(("question", "subject"), [
    ("Which HTTP status code does the server send when the feed has not changed?", ("server", "send", "feed", "chang")),
    ("Which option disables colour output in ls?", ("disabl", "colour", "output", "ls")),
    ("Which port number does sshd use?", ("sshd",)),
    ("What does ffi_call return?", ("ffi_call",)),
    ("Which version of libffi added thread safety?", ("libffi", "add", "thread", "safeti")),
    ("What is libcbor?", ()),  # no value of a type asked
])
def test_the_asked_subject_leaves_out_the_words_naming_the_asked_type(question, subject):
    assert asked_subject(question) == subject


def test_the_words_naming_the_asked_type_are_no_entity_a_passage_must_name():
    # "HTTP" of "Which HTTP status code ..." says what the value is: a passage stating it need not name HTTP (the e2e
    # 304 question was refused by the grader: "no sentence states the asked status code (no context names HTTP)")
    question = "Which HTTP status code does the server send when the feed has not changed?"
    assert fact_support(question, ["If the feed is unchanged, the server replies 304 Not Modified with no body."]).supported


def test_a_sections_number_is_no_quantity():
    # a numbered heading quoted as an answer ("4.13.17. December 2015: ...") holds no count or quantity
    assert not holds_value("4.13.17. Release notes", QUANTITY) and not holds_value("5.6.26. Fields", COUNT)
    assert holds_value("It takes 1.25 lookups on average.", QUANTITY)


def test_a_date_or_a_name_stated_for_another_event_is_not_the_asked_one():
    frozen = "On what date was Debian 9 stretch frozen?"
    assert not sentence_states("Debian 9 (stretch) was released on June 17th, 2017.", frozen)
    assert sentence_states("Debian 9 (stretch) was frozen on February 5th, 2017.", frozen)
    assert sentence_states("The freeze of stretch began on February 5th, 2017.", "When did the stretch freeze start?")
    wrote = "Who wrote the gzip format specification?"
    assert not sentence_states("The gzip format specification was published by the IETF as RFC 1952.", wrote)
    assert sentence_states("The gzip format specification was written by Peter Deutsch.", wrote)
    assert sentence_states("Peter Deutsch maintains the gzip format specification.", "Who maintains the gzip format "
                           "specification?")  # no event asked: any name tied to the question's terms
    # "release" names the asked version here, no event: the removal is what a sentence must state
    removed = "In which krb5 release will the des3-cbc-sha1 encryption type be removed?"
    assert not sentence_states("Beginning with the krb5-1.19 release, des3-cbc-sha1 logs a warning.", removed)
    assert sentence_states("The des3-cbc-sha1 encryption type will be removed in the krb5-1.21 release.", removed)
    # the value is stated with its event, in one sentence: not a name the next sentence gives
    leader = "Who was Project Leader when Debian 5.0 was released?"
    assert not sentence_states("Debian 5.0 was released in February 2009. This included the port by Martin Michlmayr.",
                               leader)
    assert sentence_states("Debian 5.0 was released in February 2009, with Steve McIntyre as Project Leader.", leader)
    # a clause saying only "changed" leaves the event to its sentence: the colon ends no event here
    added = "In which version was the retry parameter of kes.fetch added?"
    assert sentence_states("Changed in version 4.1: Added the retry parameter to kes.fetch.", added)
    assert not sentence_states("Changed in version 4.1: Removed the retry parameter of kes.fetch.", added)


def test_a_version_in_the_clause_of_another_event_is_not_the_asked_events():
    # the sentence names the asked event, but the version belongs to the clause of another one
    dropped = "Which Zorp release dropped the --legacy-tls switch?"
    assert not sentence_states("The --legacy-tls switch, introduced in Zorp 4.2, was dropped last year.", dropped)
    assert not sentence_states("Zorp 4.2 introduced the --legacy-tls switch and a later release dropped it.", dropped)
    assert sentence_states("The --legacy-tls switch, introduced in Zorp 4.2, was dropped in Zorp 5.0.", dropped)
    assert sentence_states("In Zorp 5.0, the --legacy-tls switch was dropped.", dropped)  # a clause naming no event
    assert sentence_states("Starting with the Zorp 5.0 release, the --legacy-tls switch is dropped.", dropped)
    assert sentence_states("The --legacy-tls switch, introduced in Zorp 4.2, was dropped last year.",
                           "Which Zorp release introduced the --legacy-tls switch?")


def test_a_version_in_a_clause_about_another_thing_is_not_the_asked_subjects():
    # a "which" clause dates the noun phrase it follows; an event's clause with its own object is that object's event
    first = "In which Linux version did the quillwait command first appear?"
    assert not sentence_states("quillwait needs the frobfd_open(2) system call which first appeared in Linux 6.1.", first)
    assert sentence_states("quillwait, which first appeared in Linux 6.4, waits on frobfd descriptors.", first)
    assert sentence_states("The quillwait command which first appeared in Linux 6.4 waits on descriptors.", first)
    added = "Which Zorp release introduced the knurl builtin?"
    assert not sentence_states("Zorp 4.0 introduced the notion of a strictness level, set by options to the knurl builtin.", added)
    assert sentence_states("Zorp 4.0 introduced the knurl builtin, which sets the strictness level.", added)
    assert sentence_states("The knurl builtin, which sets the strictness level, was introduced in Zorp 4.0.", added)
    since = "Since which Zorp release does the knurl builtin set the strictness level?"
    assert sentence_states("Since Zorp 4.0, the knurl builtin sets the strictness level.", since)  # no event of its own


def test_a_value_in_a_clause_about_another_thing_is_not_the_asked_subjects_of_any_kind():
    # a "which" clause states a value of the noun phrase it follows, whatever is asked; a subject with a name is
    # named by that name, not by the word of its kind ("switch" also names the --compat switch)
    port = "Which port does the frob daemon listen on?"
    assert not sentence_states("The frob daemon forwards requests to the knurl server, which listens on port 7412.", port)
    assert sentence_states("The frob daemon, which forwards requests to the knurl server, listens on port 7412.", port)
    removed = "Which Zorp release removed the --legacy switch?"
    assert not sentence_states("The --legacy switch was deprecated in Zorp 4.2, and Zorp 5.0 removed the --compat switch.",
                               removed)
    assert sentence_states("The --compat switch was deprecated in Zorp 4.2, and Zorp 5.0 removed the --legacy switch.",
                           removed)


def test_a_release_named_in_a_heading_need_not_be_named_by_each_sentence():
    """Release notes name a release ("Changes in kestrel 2.4") in a heading, not in each sentence under it: a sentence
    naming no release may state what the question asks of 2.4; one naming another release does not, nor a level or a
    number not written as a version ("level 19", "Debian 12": a row for level 1 is no row for level 19)."""
    question = "Which option, new in kestrel 2.4, makes the packer skip empty sheets?"
    assert sentence_states("The new --skip-empty option makes the packer skip empty sheets.", question)
    assert not sentence_states("Since 2.3, the new --skip-empty option makes the packer skip empty sheets.", question)
    assert not sentence_states("The kestrel 3 packer has a --skip-empty option for empty sheets.", question)
    assert not sentence_states("At level 1 the packer writes 12 sheets a second.",
                               "How many sheets a second does the packer write at level 19?")
    assert not sentence_states("Kestrel 11 ships the packer 4.2.", "Which packer version does Kestrel 12 ship?")


@pytest.mark.parametrize(("question", "sentence"), [
    # a flag written as a name in code beside the word: a constant, an assignment
    ("Which flag stops a kestrel sheet from being copied?", "Set the Ks_NO_COPY flag on the sheet to stop the copying."),
    ("Which flag makes kestrel's reader skip blank cells?", "Pass the flag skip=True and blank cells are left out."),
    ("Which new kestrel option packs empty sheets too?", "x. New packer option: pack_empty."),
    # a default named as a "default value" or "per default"
    ("What is the default width of a kestrel sheet?", "A kestrel sheet keeps its width at the default value of 80."),
    ("What are the default KS_MIN and KS_MAX?", "The default values for KS_MIN, KS_MAX are respectively 10 and 90."),
    ("Which packer does kestrel enable by default?", "Kestrel enables a packer per default (the lz packer)."),
    # a session shows what a call returns
    ("What does kes.width('a1') return in the sheet example?", "For the sheet above: >>> kes.width('a1') 12"),
    ("What does s.span(3) return in the example?", "It is called on a sheet: s.span(3) --> 0.25 for the first row."),
    # "New in version" dates an addition; a version before a date in brackets is its release
    ("In which kestrel version was the sheet marker added?", "sheet(str name): Fires when a sheet is packed. New in version 2.7."),
    ("When was kestrel 2.4.1 released?", "Changes in kestrel 2.4.1 (2031-03-02)"),
    # a length in bytes or characters
    ("What is the maximum length of a kestrel sheet name?", "A sheet name may hold up to 40 bytes."),
])
def test_a_value_written_as_documentation_writes_it_is_stated(question, sentence):
    assert sentence_states(sentence, question)


def test_a_name_in_code_is_no_flag_unless_it_is_called_one():
    assert not sentence_states("These flags are set by scripts which include the KS_SHEET_FLAGS macro from ks.m4.",
                               "Which sheet flags are not available in kestrel 7?")


def test_new_in_a_version_is_no_other_event():
    assert not sentence_states("sheet(str name): Fires when a sheet is packed. New in version 2.7.",
                               "In which kestrel version was the sheet marker removed?")


@pytest.mark.parametrize(("question", "kind"), [
    ("What is a version number?", None), ("What is a priority level?", None), ("What is a hard limit?", None),
    ("What is a default value in debconf?", None),  # each asks what such a thing is: no value of a type
    ("What is the version number of dpkg in bookworm?", VERSION), ("What is a typical block size?", QUANTITY)])
def test_a_definition_asks_no_value(question, kind):
    assert asked_fact(question).kind == kind


@pytest.mark.parametrize(("question", "sentence", "states"), [
    ("Where does the quill daemon keep its settings?", "The quill daemon keeps its settings in /etc/quill/quill.conf.", True),
    ("Where is the quill log written?", "The quill log is written to ~/.local/state/quill/log.", True),
    ("Where in the source tree is the quill packer?", "The packer lives in Tools/packer beside the other tools.", True),
    ("Where should quill bugs be reported?", "Report quill bugs at https://bugs.quill.example/new please.", True),
    ("Where is the quill log written?", "The quill log is written every hour and kept for a week.", False),
    ("Where is the quill log written?", "The quill log is written to the directory its configuration names.", False),
])
def test_a_where_question_asks_for_a_place_a_path_or_an_address_states(question, sentence, states):
    """"Where is X kept?" asks for a location: a sentence stating the path or the address states it (it was
    always caveated, the question's shape naming no value); one that names no path does not."""
    assert asked_fact(question).kind == LOCATION
    assert sentence_states(sentence, question) is states


def test_where_a_name_comes_from_asks_for_no_place():
    assert asked_fact("Where does the name quill come from?").kind is None


def test_a_sentence_saying_only_that_the_default_is_used_states_no_default():
    # "the built-in default is used" was read as stating the default (a systemd variable's
    # timeout, `answered` with no value): "default is" then a passive verb names a default in use
    question = "What is the built-in default of FROB_WAIT_SECS?"
    assert not sentence_states("If FROB_WAIT_SECS is unset or set to 0, the built-in default is used.", question)
    assert not sentence_states("When FROB_WAIT_SECS is empty the default is assumed.", question)
    assert not sentence_states("If FROB_WAIT_SECS is unset, the default value is used.", question)
    assert not sentence_states("If FROB_WAIT_SECS is unset, the default is then used.", question)
    assert not sentence_states("If FROB_WAIT_SECS is unset, the default is used for every connection.", question)
    assert sentence_states("The FROB_WAIT_SECS default is kept at 25 seconds.", question)
    assert sentence_states("The FROB_WAIT_SECS default is used as 25 seconds.", question)
    assert sentence_states("The built-in default of FROB_WAIT_SECS is 25 seconds.", question)
    assert sentence_states("FROB_WAIT_SECS: the default is 25.", question)


def test_a_dotted_name_holds_the_words_a_question_asks_by():
    # "Sheet.separator: ... It defaults to ';'." states the default separator of a sheet: the attribute's name says
    # whose default it is, though no word of the sentence repeats "separator"
    sentence = "Sheet.separator: The character put between two cells of a row. It defaults to ';'."
    assert {"sheet", "separ"} <= term_set(sentence)
    assert sentence_states(sentence, "What is the default separator of a sheet?")
    # a version's numbers and an abbreviation's letters are no words of it: "1.20.1" holds no "20", "e.g" no "g"
    assert not {"1", "20", "e", "g"} & term_set("Kestrel 1.20.1 ships sheets, e.g. for kes-2.")


def test_a_sentence_of_many_clauses_is_read_in_linear_time():
    # each clause holding a version asks what its sentence says of the event: said once per sentence, not per clause
    question = "In which version was the kes cache added?"
    sentences = {n: "The kes cache was removed in " + ", ".join(f"version 1.{i}" for i in range(n)) + "."
                 for n in (250, 2000)}
    # a "which" clause is read with the noun phrase it follows, not with all that comes before it
    chained = {n: "The kes cache needs the frob tool " + " ".join(f"which was added in version 1.{i}" for i in range(n))
               for n in (250, 2000)}

    def check(n: int, states: object) -> None:
        assert not states

    # the least of three: a busy machine's pause is no cost of the reading; linear about 8, quadratic about 64
    assert cpu_ratio(lambda n: sentence_states(sentences[n], question), 250, 2000, check=check) < 24
    assert cpu_ratio(lambda n: sentence_states(chained[n], question), 250, 2000, check=check) < 24


def test_one_long_token_is_read_in_linear_time():
    # a dotted number that runs into letters ("1.1. ... 1a1") is no version, tried once, not once per dot; a word
    # with underscores not followed by "flag" or "option" ("a_a_ ... a.") is no flag's value, tried once
    question = "Which port does kes 1.2.3 use by default?"
    dotted = {n: "The default port of kes " + "1." * n + "1a1 is 8080." for n in (500, 4000)}
    snake = {n: "Set " + "a_" * n + "a." for n in (500, 4000)}

    def check(n: int, result: object) -> None:
        assert not result

    # linear about 8, quadratic about 64
    assert cpu_ratio(lambda n: sentence_states(dotted[n], question), 500, 4000, check=check) < 24
    assert cpu_ratio(lambda n: holds_value(snake[n], FLAG), 500, 4000, check=check) < 24


def test_a_value_stated_for_another_setting_option_function_or_constant_is_not_the_asked_ones():
    # a value belongs to the names of its own clause, else of the clause before it naming one of that form (a man page's
    # heading: "QuietMode=: ... Defaults to off."), else of any the sentence names; a name a default gives as its value
    # is no owner ("Defaults to QuietSec= times two"), and a sentence naming none of the asked form states nothing of it
    setting = "What is the default of QuietSec= in quill.conf?"
    assert sentence_states("QuietSec=: How long quill stays quiet. Defaults to 30.", setting)
    assert sentence_states("QuietSec= defaults to 30 and LoudSec= to 60.", setting)
    assert not sentence_states('QuietMode=: Turns the quiet mode on. Defaults to "off".', setting)
    assert not sentence_states("LoudSec=: Defaults to QuietSec= times two.", setting)
    assert not sentence_states("LoudSec= defaults to 20 and must exceed QuietSec=.", setting)
    assert not sentence_states("Quill keeps quiet for 30 seconds by default.", setting)
    # a clause of names alone labels what follows it, a setting named later in passing does not
    assert not sentence_states("QuietMode=: Takes effect only with QuietSec= set. Defaults to off.", setting)
    assert sentence_states("Quill stays quiet as long as QuietSec= says. Defaults to 30.", setting)
    option = "What block size does the quill option -Z3 select?"
    assert sentence_states("-Z2= 32KB ; -Z3= 128KB ; -Z4= 512KB", option)
    assert not sentence_states("-Z2= 32KB ; -Z4= 512KB", option)
    lines = "How many lines per page does the quill report print with the -q option?"
    assert sentence_states("With the -q option, the quill report prints 60 lines per page.", lines)
    assert not sentence_states("With the -l option, the quill report prints 40 lines per page.", lines)
    function = "In which kestrel release was the frob_open() function added?"
    assert sentence_states("Changes in kestrel 2.1: Added the frob_open() function.", function)
    assert not sentence_states("Changes in kestrel 2.1: Added the frob_close() function.", function)
    constant = "Which kestrel release added the KES_QUIET_MODE variable?"
    assert sentence_states("Kestrel 2.4 added the KES_QUIET_MODE variable.", constant)
    assert not sentence_states("Kestrel 2.4 added the KES_LOUD_MODE variable.", constant)


def test_the_object_of_an_asked_event_is_no_event_of_its_own():
    # "removed support for X": a sentence saying support for X was added states no removal (release notes under a heading)
    removed = "Which kestrel release removed support for the KES_OLD_SHEETS variable?"
    assert not sentence_states("Changes in kestrel 2.4: Support for the KES_OLD_SHEETS variable has been added.", removed)
    assert sentence_states("Changes in kestrel 3.0: Support for the KES_OLD_SHEETS variable has been removed.", removed)
    assert sentence_states("Changes in kestrel 2.4: Support for the KES_OLD_SHEETS variable has been added.",
                           "Which kestrel release added support for the KES_OLD_SHEETS variable?")


def test_a_value_of_a_sibling_noun_phrase_is_not_the_asked_ones():
    # the clause holding the value names the asked phrase's head with another word in its place ("the frob cache" for
    # "the knurl cache") and not the asked word: it states the sibling's value, wherever the asked phrase is named
    patch = "Who wrote the patch that added the knurl cache?"
    assert sentence_states("Ada Quill wrote the patch that added the knurl cache.", patch)
    assert not sentence_states("The patch that Ada Quill wrote added the frob cache.", patch)
    builtin = "Which Zorp release added the knurl builtin?"
    assert sentence_states("Zorp 4.2 added the knurl builtin.", builtin)
    assert not sentence_states("Zorp 4.2 added the frob builtin and deprecated the knurl builtin.", builtin)
    port = "What is the default port of the knurl server?"
    assert sentence_states("The knurl server listens on port 7413 by default.", port)
    assert not sentence_states("The frob server listens on port 7412 by default.", port)


def test_capitals_of_a_heading_are_no_name():
    question = "Who maintains the quill packer?"
    assert not sentence_states("NEW FEATURES: the quill packer is maintained again.", question)
    assert sentence_states("NEW FEATURES: the quill packer is maintained by Ada Quill again.", question)


@pytest.mark.parametrize(("question", "expected"), [("Which version?", True), ("What version?", True), ("Who?", False)])
def test_a_bare_question_asks_of_no_subject_and_does_not_crash(question: str, expected: bool) -> None:
    # A typed question naming nothing has an empty subject: no event is asked, as before the events' pairing.
    assert sentence_states("Version 1.2 was released on 2020-01-02.", question) is expected


# (sentences written for the test) a release note's item states the release of its change only under its heading
@pytest.mark.parametrize(("question", "heading", "sentence", "states"), [
    ("In which Frob release was the knurl cache fixed?", "Frob 2.3.0 (2026-01-02)", "Fixed the knurl cache losing entries.", True),
    ("In which Frob release was the knurl cache fixed?", "", "Fixed the knurl cache losing entries.", False),
    ("When was the knurl cache added to Frob?", "Frob 2.3.0 (2026-01-02)", "Added the knurl cache.", True),
    ("When was the knurl cache added to Frob?", "Frob 2.3.0 (2026-01-02)", "The knurl cache is kept in memory.", False),
    ("Which port does the knurl daemon listen on?", "Frob 2.3.0", "The knurl daemon listens on port 7412.", True),
    ("Which port does the knurl daemon listen on?", "Frob 2.3.0", "The frob daemon listens on port 7412.", False),
])
def test_a_sentence_states_the_asked_value_read_under_its_sections_heading(question, heading, sentence, states):
    from shared.query.reading.answer_types import states_under_heading

    assert states_under_heading(question, [(heading, sentence)]) is states
    assert states_under_heading("How does the knurl cache work?", [(heading, sentence)]) is None  # no value of a type asked


def test_a_release_or_a_date_asked_of_no_named_release_is_checked_under_the_headings():
    from shared.query.reading.answer_types import reading_arguments, states_under_heading

    def check(question: str):
        return reading_arguments(question)[1]["typed_check"]

    assert check("In which Frob release was the knurl cache fixed?") is states_under_heading
    assert check("When was the knurl cache added to Frob?") is states_under_heading
    # a release it names ("2.3.0") must be found in a heading the chunker may not have kept: not checked so
    assert check("To which version was libknurl bumped in Frob 2.3.0?") is None
    assert check("Which port does the knurl daemon listen on?") is None  # no release or date asked
    assert check("How does the knurl cache work?") is None


# (sentences written for the test) a release's value (its name, a codename, its date) is the value of what the release
# brings, stated in the same sentence ("this release adds ...") or under the heading naming it
@pytest.mark.parametrize(("question", "heading", "sentence", "states"), [
    ("When was the plover index added?", "", "Published on 2021-09-14, this release adds the plover index.", True),
    ("When was the plover index added?", "", "Published on 2021-09-14, this release speeds up the tern index.", False),
    ("Which release added the plover index?", "", "Published on 2021-09-14, this release adds the plover index.", True),
    ("Which Wader release introduced the plover index?", "", "The Godwit release of Wader introduced the plover index.", True),
    ("Which Wader release introduced the plover index?", "", "The Godwit release of Wader made the tern index faster.", False),
    ("Which Wader release introduced the plover index?", "", "The plover index was introduced by the Wader team.", False),
    ("When was the plover index added?", "Wader 4.1, released 2021-09-14", "This release adds the plover index.", True),
    ("When was the plover index added?", "Wader 4.1", "Published 2021-09-14. This release adds the plover index.", True),
    ("When was the plover index removed?", "", "Published on 2021-09-14, this release adds the plover index.", False),
    ("Which version does the plover watch file declare?", "", "The plover watch file opens with version=4 on a line.", True),
    ("Which plover version did Wader 4.1 ship?", "", "Published on 2021-09-14, this release ships the plover index.", False),
])
def test_a_release_named_by_a_codename_or_this_release_states_what_it_brings(question, heading, sentence, states):
    from shared.query.reading.answer_types import states_under_heading

    assert states_under_heading(question, [(heading, sentence)]) is states


def test_a_release_named_by_its_date_or_its_first_word_is_no_version_stated():
    # (written for the test) not refused as a near miss (above), but no version is stated: it is not `answered` so
    assert sentence_states("Published on 2021-09-14, this release adds the plover index.", "Which release added the plover index?") is False
    assert sentence_states("Initial release of the plover index.", "Which Wader version added the plover index?") is False
    assert sentence_states("The Godwit release of Wader introduced the plover index.", "Which Wader release introduced the plover index?") is True


def test_a_default_asked_is_checked_and_stated_by_a_sentence_holding_one():
    from shared.query.reading.answer_types import reading_arguments, states_under_heading

    def check(question: str):
        return reading_arguments(question)[1]["typed_check"]

    # (written for the test) the default itself asked is checked; a thing named by a default is not
    for question in ("What is plover's default depth?", "Which cipher does the plover daemon use by default?",
                     "What is the default value of PLOVER_DEPTH?"):
        assert check(question) is states_under_heading
    assert check("Which file must a plugin installed in the default plover directory ship?") is None
    asked = "What is the default value of PLOVER_DEPTH?"
    assert states_under_heading(asked, [("", "PLOVER_DEPTH sets how deep the plover index is; it defaults to 4.")])
    assert not states_under_heading(asked, [("", "PLOVER_DEPTH sets how deep the plover index is.")])
    # an appositive states a default: "set to X, the default value, ..."
    assert holds_value("If it is set to 'deep', the default value, the plover index is rebuilt.", "default")
