"""`ragbus serve`: one process with the gateway, the page, every stage and scheduled polling."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from tests.support import (
    REPO,
    Site,
    article_html,
    interrupt,
    ragbus_env,
    rss,
    run_cli,
    serve_site,
    topic_paragraphs,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


def test_serve_polls_on_schedule_and_answers_over_http(tmp_path):
    home = tmp_path / "home"
    port = _free_port()
    with serve_site(Site()) as site:
        site.put("/posts/volcano.html", article_html("All about volcano", topic_paragraphs("volcano")))
        site.put("/feed.xml", rss(site.base, [{"title": "All about volcano", "path": "/posts/volcano.html",
                                               "guid": "g-volcano"}]), "application/rss+xml")
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        proc = subprocess.Popen(
            [sys.executable, "-m", "shared.tools.cli", "serve", "--port", str(port)], cwd=REPO,
            env=ragbus_env(home, RAGBUS_POLL_INTERVAL_S="1"), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 90
            stats = {}
            while time.monotonic() < deadline:  # nobody runs `ragbus poll`: the schedule does
                try:
                    _get(f"{base}/healthz")
                    stats = json.loads(run_cli(home, "stats", "--json").stdout)
                    if stats["documents"] == 1:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            assert stats.get("documents") == 1, stats
            status, page = _get(f"{base}/")
            assert status == 200 and b"<form" in page
            request = urllib.request.Request(
                f"{base}/v1/queries", data=json.dumps({"query": "volcano report", "wait_s": 30}).encode(),
                headers={"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(request, timeout=60) as response:
                record = json.loads(response.read())
            assert record["status"] == "answered"
            assert record["citations"] and record["citations"][0]["url"].endswith("/posts/volcano.html")
        finally:
            interrupt(proc)


def _ignore_sigint() -> None:
    # what a shell does to a job it starts in the background without job control (`nohup ragbus serve &`)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _serve_until(tmp_path, stop_signal: int) -> subprocess.CompletedProcess:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.tools.cli", "serve", "--port", str(port)], cwd=REPO,
        env=ragbus_env(tmp_path / "home"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, preexec_fn=_ignore_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                _get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                time.sleep(0.2)
        else:
            raise AssertionError("serve did not start")
        proc.send_signal(stop_signal)
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"serve did not stop on signal {stop_signal}:\n{out}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def test_serve_stops_on_sigint_even_when_started_with_sigint_ignored(tmp_path):
    done = _serve_until(tmp_path, signal.SIGINT)
    assert done.returncode == 0, done.stdout


def test_serve_stops_cleanly_on_sigterm(tmp_path):
    done = _serve_until(tmp_path, signal.SIGTERM)
    # a clean stop, not the default SIGTERM death (-15)
    assert done.returncode == 0, done.stdout
