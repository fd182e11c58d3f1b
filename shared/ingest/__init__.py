"""The domain of ingestion: the one ingestion step, the processed-items ledger, the registry of
polled listings, local files, the URL guard, ingestion progress.

Imports the contract and observability; never adapters, runtime or tools.
"""
