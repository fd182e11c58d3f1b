"""A 1,000-message burst into a function with no free capacity: how many messages the old
and the new push-subscription sizing dead-letter without ever running them (a benchmark,
not a test; tests/integration/test_delivery_under_load.py runs a smaller burst in the suite).

On the Pub/Sub emulator: one push subscription per sizing, pushing through a front that
admits ``--slots`` requests at once and answers 429 to a push that waited ``--pending-s``
for a slot (Cloud Run with every instance busy), to a functions-framework process that
works ``--work-s`` per message (tests/probes/burst.py). The subscriptions differ only in
max_delivery_attempts: 5 (infra/ before) and 100 (infra/ now, Pub/Sub's maximum).

What the emulator does differently from Pub/Sub (measured with this script; docs/google-cloud.md's
"Delivery under load" has the figures):
- it pushes about two messages of a subscription at a time (Pub/Sub widens its push
  window to many more), so the front refuses at once (``--pending-s 0``): holding a push
  as Cloud Run does (up to 10 s) would let the emulator's trickle through unrefused;
- with a retry policy it stops redelivering a burst's messages after about three
  deliveries each (``--backoff 2 120``: nothing dead-lettered, nothing finished), so the
  subscriptions have none and the emulator redelivers a refused push after about 1 s.
  Pub/Sub in the cloud waits the policy's 10 s .. 600 s between deliveries: the window
  100 attempts buy there is hours, here about 100 s, so the emulator is the harder case.

    python bench/delivery_burst.py                  # both sizings, 1,000 messages: about 3 minutes
    python bench/delivery_burst.py --messages 300 --sizing new
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.tools import emulators  # noqa: E402
from tests.probes.burst import Sizing, busy_function, run_burst  # noqa: E402

PROJECT = "ragbus-burst"


def sizings(slots: int, pending: float, backoff: tuple[float, float] | None) -> dict[str, Sizing]:
    """The subscription settings before and after issue 21."""
    return {
        # infra/ before: 5 attempts
        "old": Sizing("old: 5 attempts", 5, slots, pending, backoff),
        # infra/ now: 100 attempts (Pub/Sub's maximum)
        "new": Sizing("new: 100 attempts", 100, slots, pending, backoff),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--sizing", choices=["old", "new", "both"], default="both")
    parser.add_argument("--slots", type=int, default=1, help="instances x concurrency the front admits")
    parser.add_argument("--work-s", type=float, default=0.03, help="seconds the function works on a message")
    parser.add_argument("--pending-s", type=float, default=0.0,
                        help="seconds a push may wait for a slot before its 429 (Cloud Run: up to 10)")
    parser.add_argument("--backoff", type=float, nargs=2, metavar=("MIN_S", "MAX_S"),
                        help="give the subscriptions this retry policy; the default is none")
    parser.add_argument("--deadline-s", type=float, default=240.0, help="give up on a run after this")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not 1 <= args.messages <= 5000 or not 1 <= args.slots <= 64:
        raise SystemExit("--messages must be 1..5000 and --slots 1..64 (a loopback load test stays bounded)")
    missing = emulators.emulators_available().get(emulators.PUBSUB)
    if missing:
        raise SystemExit(f"the Pub/Sub emulator is needed: {missing}")

    chosen = sizings(args.slots, args.pending_s, tuple(args.backoff) if args.backoff else None)
    names = ["old", "new"] if args.sizing == "both" else [args.sizing]
    work_s = args.work_s
    drain_s = args.messages * work_s / args.slots
    print(f"burst of {args.messages} messages, {args.slots} slot(s), {work_s:g} s a message "
          f"(drained in >= {drain_s:.0f} s at full capacity), pending {args.pending_s:g} s, "
          f"retry policy {args.backoff or 'none'}")
    results = []
    with tempfile.TemporaryDirectory(prefix="ragbus-burst-") as tmp:
        workdir = Path(tmp)
        pubsub = emulators.start_pubsub_emulator(workdir / "logs")
        os.environ.update(pubsub.env)
        try:
            with busy_function(workdir, work_s, args.slots) as function:
                for name in names:
                    started = time.monotonic()
                    result = run_burst(PROJECT, chosen[name], messages=args.messages, work_s=work_s,
                                       workdir=workdir, deadline_s=args.deadline_s, function=function)
                    summary = result.summary()
                    results.append(summary)
                    print(f"{summary['sizing']:>20}: ran {summary['ran']}, dead-lettered "
                          f"{summary['dead_lettered']} ({summary['dead_lettered_unrun']} never ran), "
                          f"429s {summary['refused_429']}, most pushes of one message "
                          f"{summary['most_deliveries_of_one_message']}, {summary['seconds']} s"
                          + ("" if summary["finished"] else f" (NOT finished within {args.deadline_s:.0f} s)")
                          + f" [{time.monotonic() - started:.0f} s wall]")
        finally:
            pubsub.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
