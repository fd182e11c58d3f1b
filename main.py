"""Every stage's entry point, for functions-framework: ``--target=<stage>``.

Cloud Functions deploys this one source once per stage; each target is the
thin function in ``services/<stage>/main.py``.
"""

from services.cleaner.main import cleaner
from services.dead_letters.main import dead_letters
from services.feed_poller.main import feed_poller
from services.gateway.main import gateway
from services.gcs_ingest.main import gcs_deleted, gcs_finalized
from services.grader.main import grader
from services.indexer.main import indexer
from services.retriever.main import retriever
from services.synthesizer.main import synthesizer
from services.transformer.main import transformer

__all__ = [
    "cleaner",
    "dead_letters",
    "feed_poller",
    "gateway",
    "gcs_deleted",
    "gcs_finalized",
    "grader",
    "indexer",
    "retriever",
    "synthesizer",
    "transformer",
]
