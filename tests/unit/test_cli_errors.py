"""Errors reach a newcomer as one line naming the problem; tracebacks only when debugging."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from shared.observability.logs import TextFormatter
from shared.tools import cli

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def _record_with_exception() -> logging.LogRecord:
    try:
        raise ConnectionError("GET http://feeds.example/rss failed: connection refused")
    except ConnectionError:
        return logging.LogRecord("ragbus.dispatch", logging.WARNING, __file__, 1,
                                 "attempt %d failed", (1,), sys.exc_info())


def test_text_logs_carry_no_traceback_unless_debugging():
    line = TextFormatter(tracebacks=False).format(_record_with_exception())
    assert "\n" not in line and "Traceback" not in line
    assert "attempt 1 failed" in line and "http://feeds.example/rss" in line and "connection refused" in line
    full = TextFormatter(tracebacks=True).format(_record_with_exception())
    assert "Traceback (most recent call last)" in full


def test_a_credential_in_a_logged_address_is_redacted_in_text_and_json_logs():
    from shared.observability.logs import JsonFormatter

    try:
        raise ConnectionError("GET https://feeds.example/private.atom?feed_token=abc123secret&x=1 refused")
    except ConnectionError:
        record = logging.LogRecord("ragbus.feed_poller", logging.WARNING, __file__, 1, "feed %s failed",
                                   ("https://feeds.example/private.atom?feed_token=abc123secret",), sys.exc_info())
    for line in (TextFormatter(tracebacks=False).format(record), TextFormatter(tracebacks=True).format(record),
                 JsonFormatter().format(record)):
        assert "abc123secret" not in line and "feed_token=[redacted]" in line, line


def test_a_password_in_an_address_is_redacted_in_logs_and_never_echoed_by_the_refusal():
    """`ragbus feeds add https://bob:hunter2@example.com/feed.xml` answered "error: 'https://bob:hunter2@...'
    carries credentials", and a feed item's link with a user:password@ part went so into the poll's log, the
    feed's last error and its dead letter: the one credential shape redact() did not know."""
    from shared.contract.errors import InvalidInput
    from shared.contract.redaction import redact
    from shared.ingest.url_guard import check_url

    assert redact("GET https://bob:hunter2@example.com/feed.xml refused") == \
        "GET https://bob:[redacted]@example.com/feed.xml refused"
    assert redact("see user@example.com at https://example.com:8443/x") == \
        "see user@example.com at https://example.com:8443/x"  # an address and a port are no password
    with pytest.raises(InvalidInput) as refused:
        check_url("https://bob:hunter2@example.com/feed.xml", allow_loopback=False)
    assert "hunter2" not in str(refused.value) and "carries credentials" in str(refused.value)


def _run_main(monkeypatch, capsys, *args: str, **env: str) -> tuple[int, str]:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "argv", ["ragbus", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    return exit_info.value.code, capsys.readouterr().err


def _fail_unexpectedly(monkeypatch, tmp_path) -> None:
    """Opening the runtime fails with an error nothing expects (a data directory under a file is refused as a
    ConfigError now, so the OS's error is raised where the runtime is built)."""
    from shared.tools.cli import session

    def build_runtime(settings):
        raise NotADirectoryError(20, "Not a directory", str(tmp_path / "file" / "home"))

    monkeypatch.setattr(session, "build_runtime", build_runtime)
    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))


def test_an_unexpected_error_is_one_line_with_the_reason(monkeypatch, capsys, tmp_path):
    _fail_unexpectedly(monkeypatch, tmp_path)
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, "stats")
    assert code == 1
    assert "Traceback" not in err
    assert "error: NotADirectoryError" in err and str(tmp_path / "file" / "home") in err.replace("\n", "")
    assert "--debug" in err


def test_a_configuration_error_is_one_line_naming_the_variable(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, "stats", RAGBUS_HOME=str(tmp_path), RAGBUS_MAX_ITERATIONS="abc")
    assert code == 1 and "Traceback" not in err and "RAGBUS_MAX_ITERATIONS='abc' is not an integer" in err


@pytest.mark.parametrize(("args", "env"), [(("--debug", "stats"), {}), (("stats",), {"RAGBUS_LOG_LEVEL": "debug"})])
def test_debugging_shows_the_traceback(monkeypatch, tmp_path, args, env):
    _fail_unexpectedly(monkeypatch, tmp_path)
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "argv", ["ragbus", *args])
    with pytest.raises(NotADirectoryError):
        cli.main()


def test_debugging_leaves_the_traceback_to_python_once(monkeypatch, capsys, tmp_path):
    # main printed it itself and re-raised, so Python's exit printed it a second time
    _fail_unexpectedly(monkeypatch, tmp_path)
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    monkeypatch.setattr(sys, "argv", ["ragbus", "--debug", "stats"])
    with pytest.raises(NotADirectoryError):
        cli.main()
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(("command", "name"), [("ask", "question"), ("search", "text")])
def test_an_empty_question_is_named_as_the_command_calls_it(monkeypatch, capsys, tmp_path, command, name):
    # not 'query' or 'q', the HTTP API's names, which a CLI user never typed
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, command, "  ", RAGBUS_HOME=str(tmp_path / "home"))
    assert code == 2
    assert f"error: '{name}' is empty" in err and "'q'" not in err and "'query'" not in err


def test_serving_on_a_public_address_without_a_token_is_one_error_not_an_error_and_a_warning(
        monkeypatch, capsys, tmp_path):
    # it read "error: warning: --host 0.0.0.0 is reachable ..."
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, "serve", "--host", "0.0.0.0", "--port", "0",
                          RAGBUS_HOME=str(tmp_path / "home"), RAGBUS_API_TOKEN="")
    line = " ".join(err.split())
    assert code == 2 and line.startswith("error: --host 0.0.0.0 is reachable from other machines"), line
    assert "warning" not in line and "RAGBUS_API_TOKEN" in line and line.endswith("Not starting.")
    assert not (tmp_path / "home").exists()  # refused before anything was opened


@pytest.mark.parametrize("variable", ["RAGBUS_QUERY_TIMEOUT_S", "RAGBUS_FETCH_TIMEOUT_S", "RAGBUS_FETCH_DEADLINE_S",
                                      "RAGBUS_ACK_DEADLINE_S", "RAGBUS_POLL_INTERVAL_S", "RAGBUS_EVENT_MAX_AGE_S"])
@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_a_time_limit_that_would_end_or_break_everything_at_once_is_a_configuration_error(
        monkeypatch, capsys, tmp_path, variable, value):
    # they were read as any float: RAGBUS_QUERY_TIMEOUT_S=0 ended every query timed_out before a stage
    # ran, RAGBUS_ACK_DEADLINE_S=0 lost every delivery's lease at once, RAGBUS_FETCH_TIMEOUT_S=nan failed
    # every fetch with "ValueError: Invalid value NaN"
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, "stats", RAGBUS_HOME=str(tmp_path), **{variable: value})
    assert code == 1 and "Traceback" not in err
    assert f"{variable}=" in err and "must be a positive number of seconds" in err


@pytest.mark.parametrize(("env", "said"), [
    ({"RAGBUS_RETRY_MIN_BACKOFF_S": "-1"}, "RAGBUS_RETRY_MIN_BACKOFF_S=-1.0 must be a number of seconds, 0 or more"),
    ({"RAGBUS_RETRY_MAX_BACKOFF_S": "nan"}, "RAGBUS_RETRY_MAX_BACKOFF_S=nan must be a number of seconds, 0 or more"),
    ({"RAGBUS_RETRY_MIN_BACKOFF_S": "5", "RAGBUS_RETRY_MAX_BACKOFF_S": "1"},
     "RAGBUS_RETRY_MIN_BACKOFF_S=5.0 is above RAGBUS_RETRY_MAX_BACKOFF_S=1.0"),
])
def test_a_redelivery_backoff_below_zero_or_above_its_maximum_is_a_configuration_error(
        monkeypatch, capsys, tmp_path, env, said):
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, "stats", RAGBUS_HOME=str(tmp_path), **env)
    assert code == 1 and said in " ".join(err.split())


def test_a_redelivery_backoff_of_zero_is_allowed(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    code, err = _run_main(monkeypatch, capsys, "stats", "--json", RAGBUS_HOME=str(tmp_path),
                          RAGBUS_RETRY_MIN_BACKOFF_S="0")
    assert code == 0 and "error" not in err


def test_a_topology_that_is_partly_down_is_named_not_quietly_replaced_by_the_embedded_runtime(
        monkeypatch, capsys, tmp_path):
    # with one stage of `ragbus up --emulators` dead, `ragbus ingest` indexed into the embedded
    # runtime's files in the same home, where the topology (and the user, later) never looked
    import json
    import subprocess

    exited = subprocess.Popen(["true"])
    exited.wait()
    home = tmp_path / "home"
    home.mkdir()
    (home / "topology.json").write_text(json.dumps({
        "processes": [{"name": "pubsub-emulator", "kind": "emulator", "pid": os.getpid()},
                      {"name": "grader", "kind": "stage", "pid": exited.pid}],
        "env": {"RAGBUS_RUNTIME": "gcp", "GOOGLE_CLOUD_PROJECT": "ragbus-local"},
    }))
    monkeypatch.setenv("RAGBUS_LOG_LEVEL", "warning")
    monkeypatch.delenv("RAGBUS_RUNTIME", raising=False)
    code, err = _run_main(monkeypatch, capsys, "stats", RAGBUS_HOME=str(home))
    said = " ".join(err.split())
    assert code == 2 and f"grader (pid {exited.pid}) stopped" in said and "ragbus down" in said
    assert not (home / "ragbus.db").exists()  # nothing was written to the embedded runtime's files
