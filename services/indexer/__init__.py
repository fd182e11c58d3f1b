"""The indexer stage: see :mod:`services.indexer.handler`."""
