import json

from rich.console import Console

from shared.observability.terminal_text import dumps, markup, plain


def test_plain_removes_csi_osc_c1_and_bidi_but_keeps_text_tabs_and_newlines():
    hostile = ("a\x1b[2Jb\x1b]8;;http://evil.example\x07link\x1b]8;;\x1b\\ c\x1b]52;c;eA==\x07d"
               "\x9b31me\x9d8;;x\x9cf\u202eg\th\ni\x07\x00")
    assert plain(hostile) == "ablink cdefg\th\ni"
    assert plain(None) == "" and plain(42) == "42"


def test_markup_renders_literally_through_a_markup_template():
    console = Console(record=True, force_terminal=True, width=200)
    for text in ["[/]", "[link=http://evil.example/phish]x[/link]", "ends in \\", "[bold]b"]:
        console.print(f"[red]{markup(text)}[/] after")
        assert console.export_text().strip() == f"{text} after"
    console.print(f"[red]{markup('[link=http://evil.example]x')}[/]")
    assert "\x1b]8" not in console.export_text(styles=True)


def test_dumps_escapes_c1_controls_and_round_trips():
    value = {"t": "\x1b[31m\x9b2J\u202e"}
    text = dumps(value, ensure_ascii=False)
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    assert json.loads(text) == value
