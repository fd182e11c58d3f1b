"""Text from outside (feeds, pages, files, errors, model replies) made safe to print.

Two ways a string can take over a terminal: rich markup (``[/]`` raises
``MarkupError``; ``[link=…]`` prints a hidden hyperlink) and escape sequences
(ANSI CSI that moves the cursor or recolours, OSC 8 hyperlinks, OSC 52 that
writes the clipboard, the C1 forms of the same). :func:`plain` removes the
sequences and control characters; :func:`markup` additionally escapes rich
markup so the string can be embedded in a markup template; :func:`dumps`
writes JSON whose output holds no raw control character of either kind; :func:`escaped` writes a
name's control characters as escapes (``\\x07``), so the name shown is still the name the file has.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.markup import escape

# ESC-introduced sequences: CSI (ESC [ … final), OSC/DCS/SOS/PM/APC strings up to
# BEL or ST, and two-character escapes; then the 8-bit C1 forms (CSI 0x9b,
# OSC 0x9d, DCS 0x90 …), whose strings run up to ST (0x9c) or BEL.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
)
# Whatever control characters are left (keeping tab and newline), DEL, C1, and the
# bidirectional overrides that make text read differently from what it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def plain(value: Any) -> str:
    """``value`` as a string with escape sequences and control characters removed."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


#: what in a name a terminal would obey or hide: C0 and C1 controls, DEL, bidirectional overrides
_UNSHOWN = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escaped(value: Any) -> str:
    """``value`` (a file's name, a path) as a person can find it: what a terminal would obey is written as an escape
    (``\\x07``, ``\\u202e``). Dropped, as :func:`plain` drops it, 'bell\\x07.md' was shown as 'bell.md', a name no
    file has."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return _UNSHOWN.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


def markup(value: Any) -> str:
    """``value`` safe to interpolate into a rich markup string (shown exactly as text)."""
    return escape(plain(value))  # also doubles a trailing backslash that would escape the next tag


_C1_IN_JSON = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON like :func:`json.dumps`, with C1 and bidi controls written as ``\\uXXXX``.

    ``json.dumps`` already escapes C0 (ESC becomes ``\\u001b``); with
    ``ensure_ascii=False`` it would emit C1 characters such as CSI (U+009B) raw,
    which some terminals obey. The data is unchanged: a JSON reader gets the
    same strings back."""
    text = json.dumps(value, **kwargs)
    return _C1_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
