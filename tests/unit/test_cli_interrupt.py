"""Ctrl-C in a command that runs the stages (ingest, poll): it says what happens next, since the stop
may wait up to 10 s for a worker to finish its item and, silent, read as a hang."""

from types import SimpleNamespace

import pytest

from shared.tools.cli import session as session_module
from shared.tools.cli.session import Session

pytestmark = pytest.mark.unit


class Runtime:
    """Stands in for LocalRuntime: its stop waits for a busy worker (calls ``waiting``) when ``busy``."""

    busy = False

    def __init__(self, *args):
        pass

    def start(self):
        return self

    def stop(self, waiting=None):
        if Runtime.busy:
            waiting()
        return not Runtime.busy


@pytest.mark.parametrize("ending", ["ctrl-c", "ctrl-d"])
def test_a_stop_that_waits_for_a_busy_stage_says_so_and_that_the_next_run_takes_the_work_up(
        monkeypatch, capsys, ending):
    monkeypatch.setattr(session_module, "LocalRuntime", Runtime)
    monkeypatch.setattr(session_module, "require_ready", lambda *_: None)
    monkeypatch.setattr(Runtime, "busy", True)
    session = Session(settings=None, deps=None, local=SimpleNamespace(bus=None))
    if ending == "ctrl-c":
        with pytest.raises(KeyboardInterrupt), session.stages(("indexer",)):
            raise KeyboardInterrupt
    else:  # chat's Ctrl-D: the command ends as it normally does
        with session.stages(("indexer",)):
            pass
    said = " ".join(capsys.readouterr().err.split())
    assert "Ctrl-C stops at once" in said and "next `ragbus ingest`" in said


def test_a_stop_with_no_busy_stage_says_nothing(monkeypatch, capsys):
    monkeypatch.setattr(session_module, "LocalRuntime", Runtime)
    monkeypatch.setattr(session_module, "require_ready", lambda *_: None)
    with pytest.raises(KeyboardInterrupt), Session(settings=None, deps=None, local=SimpleNamespace(bus=None)).stages(
            ("indexer",)):
        raise KeyboardInterrupt
    assert capsys.readouterr().err == ""


def test_a_rerun_waiting_for_an_earlier_runs_document_counts_it_in_the_progress_rows(tmp_path):
    """`ragbus ingest big.gz`, Ctrl-C, `ragbus ingest big.gz` again: the rerun waited minutes for the
    earlier run's document with no progress row, its messages older than the rerun's start."""
    import time

    from shared.adapters.local.bus import SqliteBus
    from shared.runtime.stages import INGESTION_STAGES
    from shared.tools.cli.ingestion import _counted_since
    from shared.tools.cli.session import consumers_of
    from shared.tools.console import stage_counts

    bus = SqliteBus(tmp_path / "bus.db")
    bus.ensure_subscriptions({c.subscription: c.topic for c in consumers_of(INGESTION_STAGES)})
    indexer = next(c for c in consumers_of(INGESTION_STAGES) if c.stage == "indexer")
    bus.publish_raw(indexer.topic, b"{}", {"idempotency_key": "doc1/cleaned"})  # the earlier run's
    session = Session(settings=None, deps=None, local=SimpleNamespace(bus=bus))
    rerun_started = time.time() + 1
    assert _counted_since(session, rerun_started, set()) == rerun_started  # no earlier work: its own
    since = _counted_since(session, rerun_started, {"doc1"})
    assert stage_counts(bus.progress(since, {"doc1"}))["indexer"] == {"done": 0, "dead": 0, "total": 1}


def test_an_empty_index_with_indexing_still_queued_says_the_next_run_does_it_not_add_documents(tmp_path):
    """`ragbus ask` after an interrupted `ragbus ingest big.gz` said "add documents", as if they were lost."""
    from shared.adapters.local.bus import SqliteBus
    from shared.runtime.stages import INGESTION_STAGES
    from shared.tools.cli.reading import what_fills_it
    from shared.tools.cli.root import ADD_DOCUMENTS
    from shared.tools.cli.session import consumers_of

    bus = SqliteBus(tmp_path / "bus.db")
    bus.ensure_subscriptions({c.subscription: c.topic for c in consumers_of(INGESTION_STAGES)})
    session = Session(settings=None, deps=None, local=SimpleNamespace(bus=bus))
    assert what_fills_it(session) == ADD_DOCUMENTS
    indexer = next(c for c in consumers_of(INGESTION_STAGES) if c.stage == "indexer")
    bus.publish_raw(indexer.topic, b"{}", {"idempotency_key": "doc1/cleaned"})
    assert "still queued for indexing" in what_fills_it(session) and "`ragbus ingest`" in what_fills_it(session)


def test_serve_stopped_while_a_stage_is_busy_says_so_too(monkeypatch, capsys):
    """`ragbus serve`, Ctrl-C while it indexes a large file: up to 10 s of silence after "Ctrl-C to stop"."""
    from services.gateway import server as gateway_server
    from shared.tools.cli import serving

    system = SimpleNamespace(deps=None, bus=None, settings=SimpleNamespace(poll_interval_s=3600))
    monkeypatch.setattr(serving, "open_session", lambda *_, **__: SimpleNamespace(local=system, settings=None))
    monkeypatch.setattr(serving, "unready_stages", lambda *_: {})
    monkeypatch.setattr(serving, "LocalRuntime", Runtime)
    monkeypatch.setattr(Runtime, "busy", True)
    monkeypatch.setattr(serving, "wait_until_stopped", lambda *_: None)  # Ctrl-C at once
    monkeypatch.setattr(gateway_server, "serve", lambda *_, **__: SimpleNamespace(stop=lambda: None))
    serving.serve(host="127.0.0.1", port=8080, allow_loopback=False)
    said = " ".join(capsys.readouterr().err.split())
    assert "stopping: a stage is finishing its item" in said


def test_serve_catches_sigterm_before_its_server_answers(monkeypatch):
    """`ragbus serve` killed as soon as /healthz answered died of SIGTERM's default (-15; the whole suite
    saw it once): the handlers were installed only after the server started. They are in place first."""
    import signal

    from services.gateway import server as gateway_server
    from shared.tools.cli import serving

    seen: list[object] = []
    system = SimpleNamespace(deps=None, bus=None, settings=SimpleNamespace(poll_interval_s=3600))
    monkeypatch.setattr(serving, "open_session", lambda *_, **__: SimpleNamespace(local=system, settings=None))
    monkeypatch.setattr(serving, "unready_stages", lambda *_: {})
    monkeypatch.setattr(serving, "LocalRuntime", Runtime)
    monkeypatch.setattr(serving, "wait_until_stopped", lambda *_: None)

    def serve(*_, **__):
        seen.append(signal.getsignal(signal.SIGTERM))
        return SimpleNamespace(stop=lambda: None)

    monkeypatch.setattr(gateway_server, "serve", serve)
    before = signal.getsignal(signal.SIGTERM)
    serving.serve(host="127.0.0.1", port=8080, allow_loopback=False)
    assert seen and seen[0] is not before and callable(seen[0])
    assert signal.getsignal(signal.SIGTERM) is before  # given back


def test_demo_catches_sigterm_before_its_server_answers(monkeypatch):
    """`ragbus demo` installed its handlers only in --serve's last wait: a `kill` once its page answered
    ended it where it stood (SIGTERM's default), its sample feed left registered for every `ragbus poll`
    to fail on. From the start a SIGTERM stops it as Ctrl-C does (its finally blocks run)."""
    import signal

    from shared.tools import demo
    from shared.tools.cli import serving

    seen: list[str] = []

    def run_demo(*_, **__):
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler), "SIGTERM's default ends the demo where it stands"
        try:
            handler(signal.SIGTERM, None)
        except KeyboardInterrupt:
            seen.append("interrupted")  # the demo's finally blocks run: server stopped, feed unregistered

    monkeypatch.setattr(demo, "run_demo", run_demo)
    before = signal.getsignal(signal.SIGTERM)
    serving.demo(serve_after=True, port=0)
    assert seen == ["interrupted"]
    assert signal.getsignal(signal.SIGTERM) is before  # given back


def test_a_wait_for_a_stop_inside_stop_signals_interrupt_takes_over_until_it_ends():
    """What `ragbus demo --serve` relies on for its last wait (console.wait_until_stopped inside the demo's
    stop_signals_interrupt): inside it, a SIGTERM sets the wait's event, raising nothing; after it, a SIGTERM
    interrupts again, and after both the handler from before is back. (It was checked inside the demo's test,
    which tested the console there, not the demo.)"""
    import signal

    from shared.tools import console

    before = signal.getsignal(signal.SIGTERM)
    with console.stop_signals_interrupt():
        with console.stop_signals() as stopped:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
            assert stopped.is_set()
        with pytest.raises(KeyboardInterrupt):
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGTERM) is before


def test_ctrl_c_while_chat_waits_for_an_answer_returns_to_the_prompt_in_the_same_conversation(monkeypatch, capsys):
    """Ctrl-C while an answer was awaited ended `ragbus chat` (exit 130, a blank line): the conversation
    was lost and the next chat started a new one. It now stops the wait only, says where the question
    went, and the next question follows up in the same conversation; Ctrl-D still leaves."""
    from shared.query import api
    from shared.tools.cli import chat

    asked: list[tuple[str, str | None]] = []

    def submit(deps, question, *, conversation_id=None, **_):
        asked.append((question, conversation_id))
        return SimpleNamespace(id=f"q{len(asked)}0000000", conversation_id="c1", ended=False)

    def wait(deps, query_id, timeout):
        if query_id.startswith("q1"):
            raise KeyboardInterrupt  # the person pressed Ctrl-C while the first answer was awaited
        return SimpleNamespace(id=query_id, conversation_id="c1", ended=True, status="answered")

    lines = iter(["What is the nogroup group for?", "And the nobody user?"])

    def typed(prompt):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None  # Ctrl-D

    shown = []
    monkeypatch.setattr(api, "submit_query", submit)
    monkeypatch.setattr(api, "wait_for_query", wait)
    monkeypatch.setattr("builtins.input", typed)
    monkeypatch.setattr(chat, "print_turn", lambda record: shown.append(record.id))
    counts = chat._converse(SimpleNamespace(settings=SimpleNamespace(query_timeout_s=60)), top_k=None,
                            max_iterations=None, filters=None)
    assert counts == (1, 2)  # the first was not waited for
    assert asked == [("What is the nogroup group for?", None), ("And the nobody user?", "c1")]
    assert shown == ["q20000000"]
    said = " ".join(capsys.readouterr().out.split())
    assert "stopped waiting (Ctrl-C)" in said and "ragbus trace q1000000" in said, said


def test_piped_questions_are_echoed_after_the_prompt_so_the_transcript_reads_as_typed(monkeypatch, capsys):
    """`printf 'Q1\nQ2\n' | ragbus chat` printed "you> Note: the quoted passages ..." : a prompt with no
    question after it, the answer run on from it. Read from a pipe, the question is echoed (a terminal
    echoes it itself)."""
    import io

    from shared.query import api
    from shared.tools.cli import chat

    monkeypatch.setattr("sys.stdin", io.StringIO("What is the nogroup group for?\n"))
    monkeypatch.setattr(api, "submit_query", lambda deps, question, **_: SimpleNamespace(
        id="q10000000", conversation_id="c1", ended=True))
    monkeypatch.setattr(api, "wait_for_query", lambda deps, query_id, timeout: SimpleNamespace(
        id=query_id, conversation_id="c1", ended=True, status="answered"))
    monkeypatch.setattr(chat, "print_turn", lambda record: print("ANSWER"))
    chat._converse(SimpleNamespace(settings=SimpleNamespace(query_timeout_s=60)), top_k=None, max_iterations=None,
                   filters=None)
    out = capsys.readouterr().out
    assert "you> What is the nogroup group for?\n" in out and "you> ANSWER" not in out, out


def test_chat_exits_non_zero_when_a_question_got_no_answer(monkeypatch):
    """`printf 'Q1\nQ2\n' | ragbus chat` exited 0 after a turn timed out: a script could not tell. As `ragbus ask`
    does for its question, chat now exits 1 when any question failed, timed out or could not be asked."""
    import contextlib

    from typer.testing import CliRunner

    from shared.contract.errors import RagbusError
    from shared.query import api
    from shared.tools.cli import app, chat

    ends = {"Q1": "answered", "Q2": "timed_out", "Q3": "answered"}

    def submit(deps, question, **_):
        if question == "Q4":
            raise RagbusError("the question is too long")
        return SimpleNamespace(id=f"{question}0000000", conversation_id="c1", question=question)

    monkeypatch.setattr(chat, "open_session", lambda **_: SimpleNamespace(
        deps=SimpleNamespace(settings=SimpleNamespace(query_timeout_s=60)), stages=contextlib.nullcontext))
    monkeypatch.setattr(chat, "filters_from_flags", lambda *_: None)
    monkeypatch.setattr(chat, "say_if_nothing_can_answer", lambda *_: None)
    monkeypatch.setattr(chat, "print_turn", lambda record: None)
    monkeypatch.setattr(api, "submit_query", submit)
    monkeypatch.setattr(api, "wait_for_query", lambda deps, query_id, timeout: SimpleNamespace(
        id=query_id, conversation_id="c1", ended=True, status=ends[query_id[:2]]))

    answered = CliRunner().invoke(app, ["chat"], input="Q1\nQ3\n")
    assert answered.exit_code == 0, answered.output
    failed = CliRunner().invoke(app, ["chat"], input="Q1\nQ2\nQ3\nQ4\n")
    assert failed.exit_code == 1, failed.output
    assert "2 of 4 questions got no answer" in " ".join(failed.output.split())
