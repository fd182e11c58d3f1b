"""Ctrl-C in a command that runs the stages (ingest, poll): it says what happens next, since the stop
may wait up to 10 s for a worker to finish its item and, silent, read as a hang."""

from types import SimpleNamespace

import pytest

from shared.tools.cli import session as session_module
from shared.tools.cli.session import Session

pytestmark = pytest.mark.unit


class Runtime:
    stopped = False

    def __init__(self, *args):
        pass

    def start(self):
        return self

    def stop(self):
        Runtime.stopped = True
        return False


def test_ctrl_c_says_the_stop_may_wait_and_that_the_next_run_takes_the_work_up(monkeypatch, capsys):
    monkeypatch.setattr(session_module, "LocalRuntime", Runtime)
    monkeypatch.setattr(session_module, "require_ready", lambda *_: None)
    session = Session(settings=None, deps=None, local=SimpleNamespace(bus=None))
    with pytest.raises(KeyboardInterrupt), session.stages(("indexer",)):
        raise KeyboardInterrupt
    said = " ".join(capsys.readouterr().err.split())
    assert Runtime.stopped
    assert "Ctrl-C again" in said and "next `ragbus ingest`" in said


def test_a_command_that_ends_normally_says_nothing_of_it(monkeypatch, capsys):
    monkeypatch.setattr(session_module, "LocalRuntime", Runtime)
    monkeypatch.setattr(session_module, "require_ready", lambda *_: None)
    with Session(settings=None, deps=None, local=SimpleNamespace(bus=None)).stages(("indexer",)):
        pass
    assert capsys.readouterr().err == ""
