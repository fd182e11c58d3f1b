"""The contract every layer shares: messages and topics, ports, errors, ids, the names of the
state collections, the document text format, settings, and the dependency bundle.

Imports nothing else of ``shared``.
"""
