"""The domain of the query loop: the typed query record and its transactions, the query
operations every front door shares, grading rules; `reading/` holds the text heuristics
(extractive answers, answer types, languages).

Imports the contract and observability; never adapters, runtime or tools.
"""
