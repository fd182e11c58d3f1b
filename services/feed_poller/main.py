"""Cloud Function entry point of the feed poller (``functions-framework --target=feed_poller``).

Thin on purpose: :func:`shared.runtime.functions.pubsub_entry_point` decodes the
event, continues the trace, calls :mod:`services.feed_poller.handler` and maps the
outcome onto Pub/Sub delivery (raise to be redelivered, record and return to drop).
"""

import functions_framework

from shared.runtime.functions import pubsub_entry_point

_handle = pubsub_entry_point("feed_poller")


@functions_framework.cloud_event
def feed_poller(event) -> None:
    _handle(event)
