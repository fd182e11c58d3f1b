"""What the follow-up rule (:mod:`shared.query.reading.followup`) knows of each language it reads
(English, German, French, Spanish): its word lists (``lexicon/followup_words.tsv``) and the patterns of a
question's opening, one record a language. The rule is the same for all of them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from shared.query.reading.translation import lexicon_table


@dataclass(frozen=True)
class Language:
    """One language's words and question patterns, as the follow-up rule reads them."""

    connectives: re.Pattern[str]  # leading "and", "so", "also" that carry no content
    what_about: re.Pattern[str]  # "what about X" with X in group "x"
    frame: re.Pattern[str]  # a question's opening: interrogative and auxiliary
    copula: tuple[re.Pattern[str], ...]  # "what is X": group "s" is the subject
    other: tuple[re.Pattern[str], ...]  # "how does X ...": group "s" starts with the subject
    personal: re.Pattern[str]  # "I configure", "we set": a personal subject and its verb
    pronoun: re.Pattern[str]  # a pronoun standing for a thing
    possessive: re.Pattern[str]  # a possessive with the noun phrase after it, group "np"
    expletive: re.Pattern[str]  # an empty pronoun: left alone
    relational: frozenset[str]  # words that only mean something of something else
    scale: frozenset[str]  # ordinals and bounds: "the second" parallels "the first", "the maximum" "the minimum"
    stop: frozenset[str]  # function words, for "is the rest only relational words?"
    of: str  # "the X of Y": the word between
    about: str  # the opening of a "what about" question written out
    prepositions: frozenset[str]
    possessive_articles: dict[str, str]
    which: frozenset[str]  # the interrogatives that open a noun phrase: "which id", "welche Stufe", "quel port"
    # a word that points back at the earlier turn where the rule cannot put its subject in its place: a person ("he",
    # "sein"), a demonstrative before a noun ("that release", "esas bibliotecas"; not "qu'est-ce", "¿qué es"), a place
    # or a time ("there", "danach"), "the old one", "another", "which one", "anything else", "why the change"
    referring: re.Pattern[str]
    # "does X have a Y": the Y a yes/no question asks X about (group "x" names X, "y" is Y)
    yes_no_object: re.Pattern[str] | None = None
    what_is: str = "What is"  # "what is X" opening a question about a named value
    named_nouns: frozenset[str] = frozenset()  # nouns a name answers ("which function": its name is the subject after)
    dropped_subject: Callable[[str, str], str | None] | None = None  # a language that drops it: the earlier subject
    past: frozenset[str] = frozenset()  # irregular verbs, past tense, participle where it differs: "make:made", "write:wrote:written"


_LISTS = lexicon_table("followup_words.tsv", ("language", "list", "words"))
_p = partial(re.compile, flags=re.IGNORECASE | re.UNICODE)  # a question pattern: case is no part of it


def word_lists(language: str) -> dict[str, frozenset[str]]:
    """``language``'s word lists (relational, stop, prepositions, which, scale; English's named_nouns and past), from
    ``lexicon/followup_words.tsv``; "rule": the words the shared rule reads a clause by."""
    return {name: frozenset(words.split()) for code, name, words in _LISTS if code == language}


EN = Language(
    connectives=_p(r"^(?:(?:and|so|also|then|ok(?:ay)?|but|well|now)\b[,\s]*)+"),
    what_about=_p(r"^(?:and\s+)?(?:(?:what|how)\s+about\s+|(?:the\s+)?same\s+(?=(?:for|with|in|on)\s))(?P<x>.+)$"),
    frame=_p(r"^(?:(?:in|on|at|from|for|to|with|by|since|until|under|of)\s+(?:which|what|whom|when|where|how)\b|"
             r"what|which|who|whom|whose|how|why|when|where|is|are|was|were|do|does|did|can|could|should|"
             r"would|will|has|have|had|may|might|must|shall|tell|explain|describe|define|list|show|give|name)\b"),
    copula=(
        _p(r"^(?:what|which|who)(?:'s|\s+(?:is|are|was|were))\s+(?P<s>.+)$"),
        _p(r"^(?:tell\s+me\s+about|explain|describe|define)\s+(?P<s>.+)$"),
    ),
    other=(
        _p(r"^(?:(?:in|on|at|from|for|by|since|until|under)\s+(?=(?:which|what)\s+(?:\w+\s+){0,3}?(?:is|are|was|were)\s))?"
           r"(?:how|why|when|where|what|which|who)\s+(?:much|many|long|often|big|large|fast|well)?\s*"
           r"(?:\w+\s+){0,3}?(?:does|do|did|is|are|was|were|can|could|should|would|will|has|have|had)\s+(?P<s>.+)$"),
        _p(r"^(?:does|do|did|is|are|was|were|can|could|should|would|will|has|have)\s+(?P<s>.+)$"),
    ),
    personal=_p(r"^(?:i|we|you|one)\s+(?:\w+\s+){0,1}?(?P<verb>\w+)\s+(?P<s>.+)$"),
    pronoun=_p(r"\b(?:it|they|them|this|that|these|those)\b"),
    possessive=_p(r"\b(?P<pos>its|their)\s+(?P<np>(?:[\w/+.#-]+\s*?){1,8}?)(?=\s+(?:in|on|for|with|when|if|and|or|over|"
                  r"via|into|through|across|to|by|at|from|is|are|was|were|do|does|did|can|could|be|\w+(?<!e)ed)\b|\s*[?.!,;:]|\s*$"
                  r"|\s+[a-z]+\s+(?:for|to|with|about|on|in|of|at|from)\s*[?.!]?\s*$)"),  # "its GID | stand for"
    expletive=_p(r"\b(?:is|was|isn't|wasn't)\s+it\s+(?:\w+\s+)?(?:possible|true|necessary|safe|better|worth|"
                 r"recommended|advisable|ok|okay|required|important|allowed|a\s+good\s+idea|bad)\b"
                 r"|\bit\s+(?:is|was|'s)\s+(?:\w+\s+)?(?:possible|true|necessary|safe|better|worth|recommended|"
                 r"advisable|ok|okay|required|important|allowed)\b|\b(?:does|did|will|would)\s+it\s+take\b"
                 r"|\bit\s+takes?\s+to\b|\bhow\s+(?:is|was)\s+it\s+going\b"),
    referring=_p(r"\b(?:^why\s+(?:the|a|an)|^(?:why(?:\s+not)?|how\s+(?:come|so)|since\s+when|(?:since|until)\s+which\s+\w+|(?:and\s+)?(?:before|earlier|previously|later|now)"
                 r"|(?:and\s+)?(?:(?:in|on|for|from|at|by|with|under)\s+(?:which|what)\s+\w+(?:\s+and\s+\w+)?|when|where|how(?:\s+(?:long|often|many|much))?))$|he|she|him|her|his|hers|(?<!is\s)(?<!are\s)(?<!was\s)(?<!were\s)there|then|afterwards|(?:says?|said|does|did|do)\s+so$|such|else|instead|anyway|the\s+same|"
                 r"the\s+(?:old|other|new|former|latter|first|second|third|last|next)\s+ones?|the\s+(?:opposite|reverse|inverse)|"
                 r"^how\s+many(?=\s+(?:can|could|do|does|did|are|is|were|will|should|may)\s)|(?:this|that|these|those)\s+[a-z]\w*|another|(?:which|what)\s+one|"
                 r"(?:anything|something)\s+(?:(?!(?:under|over|after|other)\b)\w+er|more\s+\w+|less\s+\w+)\b(?!\s+than\b))\b"),
    **word_lists("en"),
    of="of",
    about="What about",
    possessive_articles={"its": "the", "their": "the"},
    yes_no_object=_p(r"^(?:does|do|did|can|could|will|would|is|are)\s+(?P<x>\S+(?:\s+\S+)?)\s+(?:have|has|run|runs|"
                     r"offer|offers|provide|provides|support|supports|ship|ships|include|includes|use|uses|keep|"
                     r"keeps|maintain|maintains|publish|publishes|there)\s+(?:an?|any|its\s+own|a\s+separate)\s+"
                     r"(?P<y>.+)$"),
)

DE = Language(
    connectives=_p(r"^(?:(?:und|also|dann|aber|ok(?:ay)?|na\s+gut|gut)\b[,\s]*)+"),
    what_about=_p(r"^(?:und\s+)?(?:was\s+ist\s+mit|wie\s+ist\s+es\s+mit|wie\s+steht\s+es\s+mit|wie\s+sieht\s+es\s+mit)"
                  r"\s+(?P<x>.+?)(?:\s+aus)?$"),
    frame=_p(r"^(?:(?:in|an|auf|mit|seit|bis|für|von|aus|zu|bei)\s+(?:welche[rsnm]?|was|wem|wen|wann)\b|"
             r"wo(?:mit|für|von|rauf|ran|rin|durch|zu|bei|nach)\b|"
             r"was|wer|wie|warum|wieso|weshalb|wann|wo|welche[rsnm]?|ist|sind|gibt|kann|können|hat|haben|"
             r"wird|werden|erkläre|beschreibe|nenne)\b"),
    copula=(_p(r"^(?:was|wer)\s+(?:ist|sind|war|waren)\s+(?P<s>.+)$"),
            _p(r"^(?:erkläre|beschreibe)\s+(?:mir\s+)?(?P<s>.+)$")),
    other=(_p(r"^(?:wie|warum|wieso|weshalb|wann|wo|welche[rsnm]?)\s+(?:viel[e]?\s+|lange\s+|hoch\s+|groß\s+)?"
              r"(?:\w+\s+)(?P<s>.+)$"),),
    personal=_p(r"^(?:ich|wir|man|du)\s+(?P<s>.+)$"),
    pronoun=_p(r"\b(?:es|er|ihn|ihm|ihnen|dies|diese|dieses)\b(?!\s+(?-i:[A-ZÄÖÜ]))|(?<=\s)sie\b|\bdas(?=\s*[?.!]|\s*$|\s+(?:ist|sind|war|"
               r"funktioniert|geht|kostet|bedeutet|heißt|hat|kann|macht)\b)"),
    possessive=_p(r"\b(?P<pos>sein|seine|seinen|seinem|seiner|seines|ihr|ihre|ihren|ihrem|ihrer|ihres|dessen|deren)"
                  r"\s+(?P<np>(?:[\w/+.#-]+\s*?){1,3}?)(?=\s+(?:in|bei|für|mit|von|und|oder|ist|sind|wenn|an)\b|"
                  r"\s*[?.!,;:]|\s*$)"),
    expletive=_p(r"\bgibt\s+es\b|\bes\s+gibt\b|\bgeht\s+es\b|\bist\s+es\s+(?:möglich|sinnvoll|nötig|notwendig|"
                 r"erlaubt|besser|wichtig)\b|\bes\s+ist\s+(?:möglich|sinnvoll|nötig|notwendig|erlaubt|besser|wichtig)\b"
                 r"|\bdauert\s+es\b|\bes\s+dauert\b"),
    referring=_p(r"\b(?:^(?:warum|wieso|weshalb)(?:\s+nicht)?$|^seit\s+wann$|^(?:und\s+)?(?:(?:in|seit|für|bis|ab|mit|an|auf)\s+"
                 r"welche[rsnm]?\s+\w+|wann|wo|wie\s+lange|wie\s+oft)$|er|ihm|ihn|sein\w*|dort|dann|sonst|"
                 r"da(?:r?(?:nach|bei|für|zu|mit|von|in|auf|an|aus|um|über|unter|vor|durch|gegen))|"
                 r"(?:diese[rsnm]?|jene[rsnm]?)\s+\w+)\b"),
    **word_lists("de"),
    of="von",
    about="Was ist mit",
    what_is="Was ist",
    possessive_articles={},
)

FR = Language(
    connectives=_p(r"^(?:(?:et|alors|donc|aussi|mais|ok)\b[,\s]*)+"),
    what_about=_p(r"^(?:et\s+)?(?:qu['’]en\s+est-il\s+(?:de|du|des|d['’])|quid\s+(?:de|du|des)|et\s+pour)\s*(?P<x>.+)$"),
    frame=_p(r"^(?:(?:d['’]|de\s+|par\s+|à\s+|pour\s+|avec\s+|en\s+|dans\s+|sur\s+|depuis\s+)"
             r"(?:où|quoi|qui|quel\w*|lequel|laquelle|lesquel\w*|combien)|lequel|laquelle|lesquel\w*|"
             r"qu['’]est-ce|qu['’]|que|quoi|quel|quelle|quels|quelles|qui|comment|pourquoi|quand|où|combien|"
             r"est-ce|est-il|est-elle|peut-on|puis-je|y\s+a-t-il|c['’]est|explique|décris)\b"),
    copula=(_p(r"^(?:qu['’]est-ce\s+que|qu['’]est\s+ce\s+que|c['’]est\s+quoi)\s+(?P<s>.+)$"),
            _p(r"^(?:quel|quelle|quels|quelles)\s+(?:est|sont|était)\s+(?P<s>.+)$"),
            # complex inversion: "Quels caractères la version amont peut-elle contenir": the subject before the verb
            _p(r"^(?:quel|quelle|quels|quelles)\s+\S+\s+(?P<s>(?:le|la|les|l['’]|un|une)\s*\S.*?)\s+\S+-(?:t-)?(?:il|elle|ils|elles)\b"),
            _p(r"^(?:explique|décris)(?:-moi)?\s+(?P<s>.+)$")),
    other=(_p(r"^(?:comment|pourquoi|quand|où|combien(?:\s+de\s+\w+)?)\s+(?:\w+\s+)?(?P<s>.+)$"),),
    personal=_p(r"^(?:je|on|nous|vous)\s+(?:\w+\s+)(?P<s>.+)$"),
    pronoun=_p(r"\b(?:il|elle|ils|elles|cela|ça|ceci)\b"),
    possessive=_p(r"\b(?P<pos>son|sa|ses|leur|leurs)\s+(?P<np>(?:[\w/+.#-]+\s*?){1,3}?)(?=\s+(?:dans|pour|avec|de|du|"
                  r"des|et|ou|est|sont|si|en)\b|\s*[?.!,;:]|\s*$)"),
    expletive=_p(r"\bil\s+(?:y\s+a|faut|existe|est\s+(?:possible|nécessaire|conseillé|recommandé))\b"
                 r"|\by\s+a-t-il\b|\bfaut-il\b|\best-il\s+(?:possible|nécessaire|conseillé|recommandé)\b"),
    referring=_p(r"\b(?:^pourquoi(?:\s+pas)?$|^depuis\s+quand$|^(?:et\s+)?(?:(?:en|dans|pour|depuis|à|de|sur|avec)\s+"
                 r"(?:quel|quelle|quels|quelles)\s+\w+|quand|où|combien)$|lui|là|ensuite|puis|sinon|(?:de|à)\s+(?:le|les)(?=\s+\w)|(?:cet|cette|ces)\s+\w+|ce\s+(?!que\b|qui\b|qu['’])\w+)"),
    **word_lists("fr"),
    of="de",
    about="Qu'en est-il de",
    what_is="Quel est",
    possessive_articles={"son": "le", "sa": "la", "ses": "les", "leur": "le", "leurs": "les"},
)

def _spanish_subject(question: str, earlier: str) -> str | None:
    """The earlier noun phrase ("los ficheros de zap") a question of one or two verbs takes ("¿Cómo se instalan?", "¿Qué
    debe ser?"); not after "¿Quién mantiene X?" (X the object; after "¿Quién es X?" the subject)."""
    verbs = [w for w in map(str.lower, re.findall(r"\w+", question)) if not (w in ES.stop | ES.prepositions or w.endswith("mente") or ES.frame.fullmatch(w))]
    alone = 0 < len(verbs) <= 2 and all(re.search(r"(?:[aeáé]n?|ó|í)$" if i == 0 else r"(?:[aeáé]n?|ó|í|[aeií]r)$", w) for i, w in enumerate(verbs))
    found = re.search(r"(?i)\b(?:el|la|los|las)\s[^,;:?]+", earlier) if alone and not re.search(r"(?i)\b(?:el|la|los|las|un|una)\b", question) else None
    return found.group() if found and not re.match(r"(?i)¿?qui[eé]n(?!\s+(?:es|son|fue|era)\b)", earlier) else None


ES = Language(
    connectives=_p(r"^¿?(?:(?:y|entonces|también|pero|vale|bueno)\b[,\s]*)+"),
    what_about=_p(r"^¿?(?:y\s+)?(?:qué\s+hay\s+de|qué\s+pasa\s+con|qué\s+tal)\s+(?P<x>.+)$"),
    frame=_p(r"^¿?(?:(?:a|de|en|con|para|por|desde|hasta)\s+(?:qué|quién|quiénes|cuál|cuáles|dónde|cuándo|cuánt\w+)|"
             r"qué|que|cuál|cuáles|quién|quiénes|cómo|por\s+qué|cuándo|dónde|cuánto|cuántos|cuánta|cuántas|"
             r"es|son|hay|puedo|puede|se|explica|describe)\b"),
    copula=(_p(r"^¿?(?:qué|cuál|cuáles|quién)\s+(?:es|son|fue|era)\s+(?P<s>.+)$"),
            _p(r"^¿?(?:explica|describe)(?:me)?\s+(?P<s>.+)$")),
    other=(_p(r"^¿?(?:cómo|por\s+qué|cuándo|dónde|cuánto|cuántos|cuánta|cuántas)\s+(?:\w+\s+)?(?P<s>.+)$"),),
    personal=_p(r"^(?:yo|nosotros)\s+(?:\w+\s+)(?P<s>.+)$"),
    pronoun=_p(r"\b(?:él|ella|ellos|ellas|esto|eso|ello)\b"),
    possessive=_p(r"\b(?P<pos>su|sus)\s+(?P<np>(?:[\w/+.#-]+\s*?){1,3}?)(?=\s+(?:en|para|con|de|del|y|o|es|son|si)\b|"
                  r"\s*[?.!,;:]|\s*$)"),
    expletive=_p(r"(?!x)x"),  # Spanish drops the empty subject rather than writing one
    referring=_p(r"(?:^por\s+qué(?:\s+no)?$|^desde\s+cuándo$|^(?:y\s+)?(?:(?:en|desde|para|hasta|con|de)\s+(?:qué|cuál)\s+\w+|"
                 r"cuándo|dónde))$|\b(?:él|allí|allá|después|luego|entonces|(?:ese|esa|esos|esas|este|esta|estos|estas|"
                 r"aquel|aquella|aquellos|aquellas)\s+\w+)\b"),
    **word_lists("es"),
    of="de",
    about="¿Qué hay de",
    what_is="¿Cuál es",
    possessive_articles={"su": "", "sus": ""},
    dropped_subject=_spanish_subject,
)

RULES = {"en": EN, "de": DE, "fr": FR, "es": ES}

# A question that says it changes the topic ("Something else: ...", "Unrelated: ...")
NEW_TOPIC = _p(r"^(?:something\s+else|unrelated|another\s+(?:question|topic|thing)|new\s+(?:question|topic)|"
                r"by\s+the\s+way|anderes\s+thema|etwas\s+anderes|autre\s+(?:question|sujet)|rien\s+à\s+voir|"
                r"otra\s+(?:pregunta|cosa)|cambiando\s+de\s+tema)\b")
# A remark, not a question, even with a question mark ("Thanks?", "Really?", "Ok, thanks?"): it asks nothing of the earlier turn
_REMARK_WORD = (r"(?:ok(?:ay)?|thanks?(?:\s+you)?|thank\s+you|cool|great|nice|really|seriously|sure|indeed|right|wow|interesting|"
                r"i\s+see|got\s+it|a\s+lot|so\s+much|very\s+much|again|danke(?:\s+schön)?|wirklich|echt|merci|vraiment|"
                r"d'accord|gracias|en\s+serio|de\s+verdad|vale)")
REMARK = _p(rf"^{_REMARK_WORD}(?:[\s,.!]+{_REMARK_WORD})*$")
