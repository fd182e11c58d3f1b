"""Which language a question is written in, and the few fixed phrases the query
loop writes itself (abstentions and caveats) in that language.

Detection is deliberately small: the script decides for Japanese, Chinese,
Korean, Russian, Greek and Arabic; for Latin-script text the count of very
common function words decides between English, Spanish, French, German,
Portuguese and Italian; text with no English function word at all, whose words
are mostly German, French or Spanish ones of the translation lexicon
(:mod:`shared.query.reading.translation`), is that language. Short or ambiguous text is
English. That is enough to tell a model which language to answer in, to pick a
phrase table, and to put a question's terms into English for the local model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from shared.query.reading.translation import english_terms, lexicon_language

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _words(text: str) -> frozenset[str]:
    """A word list written as prose, one string per language, readable in review."""
    return frozenset(text.split())


# Frequent function words and question words, chosen to be distinctive per language.
_MARKERS: dict[str, frozenset[str]] = {
    "en": _words(
        "the is are what how why which who when does do of and to in for with about "
        "explain between difference"
    ),
    "es": _words(
        "el la los las qué que cómo cuál cuáles por para es son una del con entre "
        "diferencia explica cuándo dónde"
    ),
    "fr": _words(
        "le la les est sont quoi comment pourquoi quel quelle quels des une du avec "
        "entre différence explique qu'est où"
    ),
    "de": _words(
        "der die das ist sind was wie warum welche welcher und mit zwischen unterschied "
        "erkläre ein eine für von wann"
    ),
    "pt": _words(
        "o a os as é são que como porque qual quais uma do da com entre diferença "
        "explique para não"
    ),
    "it": _words(
        "il lo la gli le è sono che come perché quale quali una del della con tra "
        "differenza spiega per"
    ),
}

# Accented letters that only some Latin-script languages use break ties.
_LETTERS: dict[str, str] = {"es": "ñ¿¡", "fr": "çèêëœàù", "de": "äöüß", "pt": "ãõç", "it": "àèìòù"}

SUPPORTED = ("en", "es", "fr", "de", "pt", "it", "ja", "zh", "ko", "ru")

NAMES = {
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "pt": "Portuguese",
    "it": "Italian",
    "ja": "Japanese",
    "zh": "Chinese",
    "ko": "Korean",
    "ru": "Russian",
    "el": "Greek",
    "ar": "Arabic",
}


def detect_language(text: str) -> str:
    """ISO 639-1 code of ``text``'s language; ``"en"`` when unsure."""
    counts = {"ja_kana": 0, "han": 0, "hangul": 0, "cyrillic": 0, "greek": 0, "arabic": 0}
    for ch in text:
        code = ord(ch)
        if 0x3040 <= code <= 0x30FF:
            counts["ja_kana"] += 1
        elif 0x4E00 <= code <= 0x9FFF:
            counts["han"] += 1
        elif 0xAC00 <= code <= 0xD7AF:
            counts["hangul"] += 1
        elif 0x0400 <= code <= 0x04FF:
            counts["cyrillic"] += 1
        elif 0x0370 <= code <= 0x03FF:
            counts["greek"] += 1
        elif 0x0600 <= code <= 0x06FF:
            counts["arabic"] += 1
    # Kana is specific to Japanese; Han alone is Chinese (Japanese mixes both).
    if counts["ja_kana"] >= 1:
        return "ja"
    if counts["hangul"] >= 2:
        return "ko"
    if counts["han"] >= 2:
        return "zh"
    if counts["cyrillic"] >= 3:
        return "ru"
    if counts["greek"] >= 3:
        return "el"
    if counts["arabic"] >= 3:
        return "ar"

    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return "en"
    lowered = text.lower()
    scores: dict[str, float] = {}
    for lang, markers in _MARKERS.items():
        score = float(sum(1 for w in words if w in markers))
        score += 0.5 * sum(lowered.count(ch) for ch in _LETTERS.get(lang, ""))
        scores[lang] = score
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    # One shared word ("la", "a") is not evidence; English wins ties and near-ties.
    if best != "en" and scores[best] < max(1.5, scores["en"] + 1):
        best = "en"
    if best == "en" and scores["en"] > 0:
        return best
    # Too few function words to tell ("Warum braucht man Wiederholungsversuche?"), or a near
    # tie between Romance languages ("À quelles adresses ... doit-il" scored Italian on "il"):
    # the translation lexicon's words decide when most of the text is one of its languages.
    lexical = lexicon_language(text)
    if best == "en":
        return lexical or "en"
    if lexical and lexical != best and scores[lexical] + 1.5 >= scores[best]:
        return lexical
    return best


_PHRASES: dict[str, dict[str, str]] = {
    "abstain": {
        "en": "I could not find anything in the indexed documents that answers this question, "
        "so I will not guess.",
        "es": "No encontré nada en los documentos indexados que responda a esta pregunta, "
        "así que no voy a adivinar.",
        "fr": "Je n'ai rien trouvé dans les documents indexés qui réponde à cette question ; "
        "je préfère ne pas deviner.",
        "de": "In den indexierten Dokumenten habe ich nichts gefunden, das diese Frage "
        "beantwortet, daher rate ich nicht.",
        "pt": "Não encontrei nada nos documentos indexados que responda a esta pergunta, "
        "por isso não vou adivinhar.",
        "it": "Non ho trovato nulla nei documenti indicizzati che risponda a questa domanda, "
        "quindi non tirerò a indovinare.",
        "ja": "索引済みの文書には、この質問に答える情報が見つかりませんでした。推測による回答は控えます。",
        "zh": "在已索引的文档中没有找到能回答这个问题的内容，因此不作猜测。",
        "ko": "색인된 문서에서 이 질문에 답할 수 있는 내용을 찾지 못했으므로 추측하지 않겠습니다.",
        "ru": "В проиндексированных документах не нашлось ничего, что отвечает на этот вопрос, "
        "поэтому я не буду гадать.",
    },
    "caveat": {
        "en": "Note: the retrieved sources only partly cover this question; "
        "the answer below may be incomplete.",
        "es": "Nota: las fuentes recuperadas solo cubren en parte esta pregunta; "
        "la respuesta puede estar incompleta.",
        "fr": "Remarque : les sources trouvées ne couvrent qu'en partie cette question ; "
        "la réponse peut être incomplète.",
        "de": "Hinweis: Die gefundenen Quellen decken diese Frage nur teilweise ab; "
        "die Antwort kann unvollständig sein.",
        "pt": "Nota: as fontes encontradas cobrem esta pergunta apenas em parte; "
        "a resposta pode estar incompleta.",
        "it": "Nota: le fonti trovate coprono solo in parte questa domanda; "
        "la risposta potrebbe essere incompleta.",
        "ja": "注意：取得した情報源はこの質問を部分的にしか扱っていないため、回答は不完全な可能性があります。",
        "zh": "注意：检索到的来源只部分涵盖了这个问题，以下回答可能不完整。",
        "ko": "참고: 검색된 출처가 이 질문을 부분적으로만 다루므로 답변이 불완전할 수 있습니다.",
        "ru": "Примечание: найденные источники лишь частично охватывают этот вопрос; "
        "ответ может быть неполным.",
    },
    # The caveat the reader's answer opens with, built from what it found (``{found}``: the question's words the
    # quoted passages hold) and did not (``{asked}``: the value or list the question asks for, in its words;
    # ``{missing}``: parts of the question and its names the quoted passages lack). "Which GID ...?": the note
    # names the GID. The value and list notes are English: only an English question's shape names what it asks.
    "caveat_value": {
        "en": "Note: the sources mention {found}, but I found no sentence stating {asked}; "
        "the closest passages are quoted below.",
    },
    "caveat_value_alone": {
        "en": "Note: I found no sentence stating {asked}; the closest passages are quoted below.",
    },
    "caveat_list": {
        "en": "Note: the sources mention {found}, but I found no sentence listing {asked}; "
        "the closest passages are quoted below.",
    },
    "caveat_list_alone": {
        "en": "Note: I found no sentence listing {asked}; the closest passages are quoted below.",
    },
    "caveat_missing": {
        "en": "Note: the quoted passages mention {found} but not {missing}; they may not answer the whole question.",
        "es": "Nota: los pasajes citados mencionan {found}, pero no {missing}; puede que no respondan a toda "
        "la pregunta.",
        "fr": "Remarque : les passages cités mentionnent {found}, mais pas {missing} ; ils ne répondent peut-être "
        "pas à toute la question.",
        "de": "Hinweis: Die zitierten Stellen erwähnen {found}, aber nicht {missing}; sie beantworten die Frage "
        "womöglich nicht ganz.",
        "pt": "Nota: os trechos citados mencionam {found}, mas não {missing}; talvez não respondam à pergunta inteira.",
        "it": "Nota: i passi citati menzionano {found}, ma non {missing}; potrebbero non rispondere a tutta "
        "la domanda.",
        "ja": "注意：引用した箇所は{found}に触れていますが、{missing}には触れていません。質問全体には答えていない可能性があります。",
        "zh": "注意：引用的段落提到了{found}，但没有提到{missing}，可能没有完整回答这个问题。",
        "ko": "참고: 인용한 구절은 {found}을(를) 언급하지만 {missing}은(는) 언급하지 않으므로 질문 전체에 답하지 못할 수 있습니다.",
        "ru": "Примечание: в приведённых отрывках упоминается {found}, но не {missing}; возможно, они отвечают "
        "не на весь вопрос.",
    },
    "caveat_missing_alone": {
        "en": "Note: the quoted passages do not mention {missing}; they may not answer the question.",
        "es": "Nota: los pasajes citados no mencionan {missing}; puede que no respondan a la pregunta.",
        "fr": "Remarque : les passages cités ne mentionnent pas {missing} ; ils ne répondent peut-être pas "
        "à la question.",
        "de": "Hinweis: Die zitierten Stellen erwähnen {missing} nicht; sie beantworten die Frage womöglich nicht.",
        "pt": "Nota: os trechos citados não mencionam {missing}; talvez não respondam à pergunta.",
        "it": "Nota: i passi citati non menzionano {missing}; potrebbero non rispondere alla domanda.",
        "ja": "注意：引用した箇所は{missing}に触れていません。質問に答えていない可能性があります。",
        "zh": "注意：引用的段落没有提到{missing}，可能没有回答这个问题。",
        "ko": "참고: 인용한 구절은 {missing}을(를) 언급하지 않으므로 질문에 답하지 못할 수 있습니다.",
        "ru": "Примечание: в приведённых отрывках не упоминается {missing}; возможно, они не отвечают на вопрос.",
    },
    "caveat_unsure": {
        "en": "Note: the quoted passages mention {found}, but I am not sure they answer the question as asked.",
        "es": "Nota: los pasajes citados mencionan {found}, pero no estoy seguro de que respondan a la pregunta "
        "tal como se formuló.",
        "fr": "Remarque : les passages cités mentionnent {found}, mais je ne suis pas sûr qu'ils répondent "
        "à la question telle qu'elle est posée.",
        "de": "Hinweis: Die zitierten Stellen erwähnen {found}, aber ich bin nicht sicher, dass sie die Frage "
        "so beantworten, wie sie gestellt ist.",
        "pt": "Nota: os trechos citados mencionam {found}, mas não tenho certeza de que respondam à pergunta "
        "tal como foi feita.",
        "it": "Nota: i passi citati menzionano {found}, ma non sono sicuro che rispondano alla domanda così "
        "come è posta.",
        "ja": "注意：引用した箇所は{found}に触れていますが、質問にそのまま答えているかは確かではありません。",
        "zh": "注意：引用的段落提到了{found}，但我不确定它们是否正面回答了这个问题。",
        "ko": "참고: 인용한 구절은 {found}을(를) 언급하지만 질문에 그대로 답하는지는 확실하지 않습니다.",
        "ru": "Примечание: в приведённых отрывках упоминается {found}, но я не уверен, что они отвечают именно "
        "на заданный вопрос.",
    },
    # The caveat when the model could not write the answer and the sources were quoted instead:
    # "the sources only partly cover this question" would blame the documents for the model's failure.
    "caveat_no_model": {
        "en": "Note: the model could not be used, so this answer quotes the retrieved sources directly; "
        "it may be incomplete.",
        "es": "Nota: no se pudo usar el modelo, así que esta respuesta cita directamente las fuentes "
        "recuperadas; puede estar incompleta.",
        "fr": "Remarque : le modèle n'a pas pu être utilisé, cette réponse cite donc directement les sources "
        "trouvées ; elle peut être incomplète.",
        "de": "Hinweis: Das Modell war nicht nutzbar, daher zitiert diese Antwort direkt die gefundenen "
        "Quellen; sie kann unvollständig sein.",
    },
    # The refusal when the query's filters let no indexed document through (``{filters}``: as described).
    "abstain_filtered": {
        "en": "No indexed document matches the filters ({filters}), so there is nothing to answer from; "
        "widen or remove them.",
        "de": "Kein indiziertes Dokument passt zu den Filtern ({filters}), daher gibt es nichts, woraus "
        "geantwortet werden kann; erweitern oder entfernen Sie sie.",
        "fr": "Aucun document indexé ne correspond aux filtres ({filters}) : il n'y a rien pour répondre ; "
        "élargissez-les ou retirez-les.",
        "es": "Ningún documento indexado coincide con los filtros ({filters}), así que no hay nada con qué "
        "responder; amplíelos o quítelos.",
    },
    # A part of an English question no retrieved sentence speaks to (``{part}``: its words).
    "not_mentioned": {
        "en": "Not mentioned in the sources: {part}.",
    },
}


@functools.lru_cache(maxsize=1024)  # the transformer, retriever, grader and synthesizer each ask
def in_english(question: str) -> tuple[str, str]:
    """(``question``'s language, its search terms in English): see
    :func:`shared.query.reading.translation.english_terms`; English, and languages the lexicon
    lacks, come back unchanged."""
    language = detect_language(question)
    return language, english_terms(question, language)


def fixed_notes() -> frozenset[str]:
    """The fixed paragraphs ragbus writes around an answer's content, in every language: the notes an answer
    may open with ("Note: the retrieved sources only partly cover ...", which every caveat said until the
    reader's notes named what it found, and which earlier answers a chat client sends back still hold) and
    the refusal a chat client keeps as the assistant's message. Not an earlier answer's content when a
    follow-up reads it; :func:`is_note` also knows the notes built from what the reader found."""
    return frozenset(text for key in ("caveat", "caveat_no_model", "abstain") for text in _PHRASES[key].values())


#: the notes built from what the reader found (see the "caveat_*" phrases)
CAVEAT_NOTES = ("caveat_value", "caveat_value_alone", "caveat_list", "caveat_list_alone", "caveat_missing",
                "caveat_missing_alone", "caveat_unsure")


@functools.cache
def _note_patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(re.sub(r"\\{\w+\\}", ".+?", re.escape(text)) + r"\Z", re.DOTALL)
                 for key in CAVEAT_NOTES for text in _PHRASES[key].values())


def is_note(paragraph: str) -> bool:
    """Whether ``paragraph`` is a note ragbus wrote around an answer (a fixed one, or one built from what the
    reader found), not content: a document's own "Note: ..." sentence, quoted, carries its citation mark."""
    text = paragraph.strip()
    return text in _FIXED or (not _CITATION_MARK.search(text) and any(p.match(text) for p in _note_patterns()))


_CITATION_MARK = re.compile(r"\[\d+\]")

# How a note quotes the question's words and lists them: opening and closing quotation marks, then the word
# joining the last two ("and"), and the one joining things the passages lack ("but not A or B").
_QUOTES: dict[str, tuple[str, str, str, str]] = {
    "en": ("“", "”", " and ", " or "), "es": ("«", "»", " y ", " ni "), "fr": ("« ", " »", " et ", " ni "),
    "de": ("„", "“", " und ", " oder "), "pt": ("“", "”", " e ", " nem "), "it": ("«", "»", " e ", " né "),
    "ja": ("「", "」", "と", "や"), "zh": ("“", "”", "和", "或"), "ko": ("‘", "’", ", ", ", "),
    "ru": ("«", "»", " и ", " и "),
}


def quoted_words(words: Sequence[str], language: str, *, either: bool = False) -> str:
    """``words`` quoted and listed as a note in ``language`` writes them: “tty group” and “systemd”
    (``either``: “GID” or “UID”, for what the passages lack)."""
    opening, closing, both, one = _QUOTES.get(language, _QUOTES["en"])
    items = [f"{opening}{w}{closing}" for w in words]
    if len(items) <= 1:
        return "".join(items)
    comma = "、" if language in ("ja", "zh") else ", "
    return comma.join(items[:-1]) + (one if either else both) + items[-1]


_FIXED = fixed_notes()


def phrase(key: str, language: str) -> str:
    """A fixed sentence (``"abstain"``, ``"caveat"``, ``"not_mentioned"``) in ``language``,
    else English."""
    table = _PHRASES[key]
    return table.get(language, table["en"])
