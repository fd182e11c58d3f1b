"""What the CLI and the demo show people: progress rows per stage and answers.

Both commands print through these, so neither imports the other.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from shared.observability.terminal_text import markup, plain
from shared.query.record import QueryRecord
from shared.runtime.bootstrap import LocalSystem
from shared.runtime.local import LocalRuntime

# Wide enough that no line of ours is ever wrapped, narrow enough that nothing is padded to it.
PIPED_WIDTH = 100_000


class _Console(Console):
    """Rich's console, except that output into a pipe or a file is not wrapped at 80 columns:
    a URL, a date or a table row cut in two is wrong data for grep, a pager or a program. A
    terminal, or COLUMNS when set, gives the width as before."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._width is None and not self.is_terminal and "COLUMNS" not in os.environ:
            return ConsoleDimensions(PIPED_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _Console()
err = _Console(stderr=True)



def cited_place(citation: dict[str, Any]) -> str:
    """A citation's title and, when it has one, where in its file it stands: "Policy Manual (p. 12)"."""
    position = citation.get("position")
    return plain(citation.get("title")) + (f" ({plain(position)})" if position else "")

def stage_progress() -> Progress:
    """The progress display every waiting command shows on stderr: a spinner, a label, a bar
    and a count per row; the rows stay on screen when done, so the counts can be read after."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=False)


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT (Ctrl-C) or SIGTERM (`kill`) while the block runs, then the previous handlers back.

    Both are caught explicitly: a process started in the background of a non-interactive shell
    (`nohup ragbus serve &`, a test suite under nohup) inherits SIGINT as ignored, and Python then
    never raises KeyboardInterrupt; SIGTERM's default would end the process without stopping the
    server and the stages cleanly. Enter it before a server answers: a signal sent once it does is caught."""
    stopped = threading.Event()
    with _stop_signals_handled(lambda *_: stopped.set()):
        yield stopped


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt while the block runs, as Ctrl-C does by default: work
    stopped by `kill` (or by a Ctrl-C a background shell would ignore) runs its finally blocks, instead of
    the process ending where it stands. A :func:`stop_signals` entered inside it takes over until it ends."""
    with _stop_signals_handled(signal.default_int_handler):
        yield


@contextlib.contextmanager
def _stop_signals_handled(handler: Any) -> Iterator[None]:
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_until_stopped(stopped: threading.Event | None = None) -> None:
    """Block until SIGINT or SIGTERM (:func:`stop_signals`; ``stopped``: the event of one already entered)."""
    if stopped is None:
        with stop_signals() as stopped:
            wait_until_stopped(stopped)
        return
    while not stopped.wait(1.0):
        pass


def stage_counts(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Per stage (a stage may read several subscriptions): messages done, failed and in all,
    only for stages that got any: a row for a stage with nothing to do would never finish."""
    out: dict[str, dict[str, int]] = {}
    for sub, c in counts.items():
        total = c.get("pending", 0) + c.get("acked", 0) + c.get("dead", 0)
        if not total:
            continue
        row = out.setdefault(sub.split(".")[0], {"done": 0, "dead": 0, "total": 0})
        row["done"] += c.get("acked", 0) + c.get("dead", 0)
        row["dead"] += c.get("dead", 0)
        row["total"] += total
    return out


def wait_with_progress(system: LocalSystem, runtime: LocalRuntime, since: float, timeout: float, label: str,
                       subjects: Collection[str] | None = None) -> bool:
    """Show what each stage has done with the messages published since ``since``: one row per
    stage as soon as it has work, its count moving; every row complete when the work is.
    ``subjects``: count only messages about these documents (or queries), the command's own:
    another command running beside it has its own counts."""
    subs = [c.subscription for c in runtime.consumers]
    deadline = time.monotonic() + timeout
    with stage_progress() as progress:
        tasks: dict[str, Any] = {}

        def show() -> None:
            counts = {sub: c for sub, c in system.bus.progress(since, subjects).items() if sub in subs}
            for stage, c in stage_counts(counts).items():
                if stage not in tasks:
                    tasks[stage] = progress.add_task(f"{stage:<12}", total=c["total"])
                dead = f" [red]{c['dead']} failed[/]" if c["dead"] else ""
                progress.update(tasks[stage], total=c["total"], completed=c["done"], description=f"{stage:<12}{dead}")

        idle_since = None
        while time.monotonic() < deadline and runtime.halted is None:
            show()
            if system.bus.outstanding(subs) == 0:
                # a stage may be between acking one message and publishing the next
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 0.3:
                    show()
                    return True
            else:
                idle_since = None
            time.sleep(0.1)
        for task in progress.tasks:  # the spinners stop; the counts say what is left
            if not task.finished:
                progress.update(task.id, description=f"{task.description} [yellow](unfinished)[/]")
        progress.stop()
    if runtime.halted is not None:
        err.print(f"[red]{label}: stopped: {markup(runtime.halted)}[/]")
        return False
    err.print(f"[yellow]{label}: still working after {timeout:.0f} s; the rest continues on the next "
              f"`ragbus poll`, `ingest` or `serve`[/]")
    return False


def dead_since(system: LocalSystem, since: float, subjects: Collection[str] | None = None) -> int:
    """How many messages published since ``since`` (about ``subjects``, when given) were dead-lettered."""
    return sum(c.get("dead", 0) for c in system.bus.progress(since, subjects).values())


def print_answer(record: QueryRecord) -> None:
    from shared.contract.text import in_quotes, meaningful_rewrite

    outcome = record.outcome or record.status
    console.print(f"[bold]outcome:[/] {markup(outcome)}   [bold]iterations:[/] {len(record.iterations)}")
    filters = record.search_filters()
    if filters is not None:
        console.print(Text(f"  filters: {filters.describe()}"))
    time = record.time_filter or {}
    if time.get("phrase"):
        # as the page says it: the question's time words, the range they became, each widening
        since, until = (time.get("since") or "")[:10], (time.get("until") or "")[:10]
        span = (f"from {since} to before {until}" if since and until else f"since {since}" if since
                else f"before {until}" if until else "at any time")
        widened = f"; widened: {' -> '.join(time['widened'])}" if time.get("widened") else ""
        console.print(Text(f"  time: {in_quotes(time['phrase'])} read as published {span}{widened}"))
    for it in record.iterations:
        shown = (it.shown_scores or {}).get("score") or (f"{it.grade.score:.2f}" if it.grade is not None else "")
        score = f"score {shown}" if it.grade is not None else "not graded"
        failed = list(it.failed_thresholds or ())
        if failed and failed[0].startswith("score "):
            # the score below its threshold heads the line as the rule reads it ("score 0.5999 < 0.6"): rounded
            # to two places it read "score 0.60 (score 0.5999 < 0.6)"
            score = failed.pop(0)
        if failed:
            # the rule the decision follows, so "0.79, refine" above "0.72, accept" reads true
            score += f" ({', '.join(failed)})"
        # numbered from 1, as on the page and in `ragbus trace`; the JSON keeps the 0-based field
        line = Text(f"  iteration {it.iteration + 1}: {score}, {plain(it.decision or '')}")
        if len(record.iterations) > 1 and it.iteration == record.best_iteration:
            # the answer quotes this iteration's passages, as the page's "kept" badge says: a refined
            # iteration may be kept over the one the loop ended on
            line.append(", kept")
        rewrite = meaningful_rewrite(record.question or "", it.query or "")
        if rewrite:
            line.append(f"  (searched: {plain(rewrite)})")
        if it.added_terms:  # apart from the question asked, as the page shows them
            line.append(f"  (search terms added: {plain(it.added_terms)})")
        console.print(line)
        # the decision the answer's reading made (the synthesizer wrote it over the grader's): say why
        reader = it.grade.reasoning.partition(" The reader: ")[2] if it.grade is not None else ""
        if reader:
            console.print(Text(f"    the reader: {plain(reader.rstrip('.'))}"))
    # as the page lists them: an answer the model had no part in must not read as the model's
    for f in record.fallbacks:
        iteration = f.get("iteration")
        at = f", iteration {iteration + 1}" if isinstance(iteration, int) else ""
        console.print(Text(f"  without the model: {plain(f.get('stage'))}{at} ({plain(f.get('reason'))})",
                           style="yellow"))
    if record.error:
        console.print(Text(plain(record.error), style="red"))
    if record.answer:
        console.print(Text(f"\n{plain(record.answer)}\n"))
    for c in record.citations:
        console.print(Text(f"  [{plain(c.get('id'))}] {cited_place(c)} — {plain(c.get('url'))}"), soft_wrap=True)
