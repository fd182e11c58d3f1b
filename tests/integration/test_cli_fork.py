"""tests/cli_fork.py: a `ragbus` command forked from the zygote is the command a fresh
`python -m shared.tools.cli` runs: the same output, exit status, width and process identity."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests import cli_fork
from tests.support import REPO, ragbus_env


def _plain(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shared.tools.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args,extra", [
    (("nosuchcommand",), {"COLUMNS": "50"}),  # a usage error in a box as wide as COLUMNS: 2
    (("nosuchcommand",), {}),  # piped, no COLUMNS: the box as wide as the CLI's piped width
    (("dead-letters", "retry", "feedface"), {}),  # the CLI's own error: 2
])
def test_a_forked_command_says_and_exits_as_a_fresh_process(tmp_path, args, extra):
    env = ragbus_env(tmp_path / "home", **extra)
    forked, plain = cli_fork.run(args, REPO, env, 300), _plain(args, env)
    assert not cli_fork._the_zygote().refused
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert forked.args == plain.args


def test_a_forked_command_runs_as_its_own_process_with_the_call_s_environment(tmp_path):
    """The zygote's pid is nobody's: the bus's lease owner is the command's own; a variable the
    call sets (not the zygote's) reaches the command; a timeout kills the command."""
    from shared.adapters.local import bus

    zygote = cli_fork._the_zygote()
    assert not zygote.refused
    assert bus._OWNER == f"{socket.gethostname()}:{os.getpid()}"  # in this process, as imported
    cli_fork._per_process()
    assert bus._OWNER == f"{socket.gethostname()}:{os.getpid()}"
    # RAGBUS_HOME only in the call's environment: stats names that home
    stats = cli_fork.run(("stats",), REPO, ragbus_env(tmp_path / "elsewhere"), 300)
    assert stats.returncode == 0 and str(tmp_path / "elsewhere") in stats.stdout + stats.stderr
    with pytest.raises(subprocess.TimeoutExpired):
        cli_fork.run(("serve", "--port", "0"), REPO, ragbus_env(tmp_path / "home"), 0.5)


def test_a_call_whose_startup_environment_differs_is_forked_from_a_zygote_started_with_it(tmp_path, monkeypatch):
    home = tmp_path / "home"
    seeded = cli_fork._the_zygote(ragbus_env(home, PYTHONHASHSEED="7"))
    assert seeded is not cli_fork._the_zygote(ragbus_env(home)) and seeded.startup["PYTHONHASHSEED"] == "7"
    assert "PYTHONHASHSEED" not in cli_fork._the_zygote(ragbus_env(home)).startup
    # COLUMNS is read when a console measures itself: no zygote of its own
    assert cli_fork._the_zygote(ragbus_env(home, COLUMNS="60")) is cli_fork._the_zygote(ragbus_env(home))
    # past the most zygotes a test process keeps: a plain subprocess
    monkeypatch.setattr(cli_fork, "_MOST_ZYGOTES", len(cli_fork._zygotes))
    calls = []
    monkeypatch.setattr(cli_fork._Zygote, "run", lambda self, *a: calls.append(a))
    done = cli_fork.run(("feeds", "list", "--json"), REPO, ragbus_env(home, PYTHONHASHSEED="8"), 300)
    assert done.returncode == 0 and done.stdout.strip() == "[]" and calls == []


def test_a_module_global_holding_the_pid_is_refused(monkeypatch):
    import shared.tools.cli as cli

    assert cli_fork._pid_globals() == ""
    monkeypatch.setattr(cli, "_SOMEONES_PID", f"host:{os.getpid()}", raising=False)
    assert "shared.tools.cli._SOMEONES_PID" in cli_fork._pid_globals()


def test_a_constant_that_equals_the_pid_is_no_pid_global(monkeypatch):
    """In a container the pid is small: 1024 is also the synthesis budget prompts.py writes (CI's pid once
    matched a number in that module's docstring and the check refused a module holding no pid)."""
    import shared.query.prompts  # noqa: F401 -- the module whose constants and docstring hold 1024

    monkeypatch.setattr(cli_fork.os, "getpid", lambda: 1024)
    assert cli_fork._pid_globals() == ""


def test_no_constant_of_the_cli_s_modules_is_taken_for_the_pid(monkeypatch):
    """Whatever pid a test process or the zygote has, a number the project's modules hold as a constant is no
    pid: 2000 is written 2_000, 98304 is 96 * 1024, the embedder's 524288 is 8 * _MODEL_SEQUENCE ** 2, the
    gateway's MAX_COMMENT_CHARS is imported (the check refused at those pids, as at 1024 in CI)."""
    import importlib

    # the genai embedder's DEFAULT_CONCURRENCY (8) is another object's field (DEFAULTS.embed_concurrency): in the
    # whole suite an earlier test had imported it, and at pid 8 the check refused it
    for name in (cli_fork.MODULE, *cli_fork._PRELOADED, "services.gateway.schemas", "shared.adapters.local.embedder",
                 "shared.adapters.gcp.genai_embedder"):
        importlib.import_module(name)
    numbers = {value for name, module in list(sys.modules.items()) if name.startswith(("shared", "services"))
               for attr, value in list(vars(module).items())
               if type(value) is int and 1 < value < 4_194_304 and not attr.startswith("__")}
    assert {2000, 98304, 131072, 524288} <= numbers
    for number in sorted(numbers):
        monkeypatch.setattr(cli_fork.os, "getpid", lambda number=number: number)
        assert cli_fork._pid_globals() == "", number



def test_a_pid_global_is_refused_though_its_digits_are_elsewhere_in_the_module(monkeypatch):
    """A small pid (2, in a container) is written somewhere in nearly every module (the local bus writes 2,
    4, 8 ...): only the global's own assignment says it is a constant, so a planted 'host:2' is refused."""
    import shared.adapters.local.bus as bus

    monkeypatch.setattr(cli_fork.os, "getpid", lambda: 2)
    assert cli_fork._pid_globals() == ""
    monkeypatch.setattr(bus, "_LEAKED", "host:2", raising=False)
    assert "shared.adapters.local.bus._LEAKED" in cli_fork._pid_globals()
