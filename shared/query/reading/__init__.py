"""Reading text: which sentence of the contexts states the asked fact, and in which language.

The offline reader's text heuristics (the extractive answerer, what is quotable, answer types,
language detection, translation by a shipped lexicon, stemming) apart from the query loop's
state. Imports the contract and observability; never adapters, runtime or tools.
"""
