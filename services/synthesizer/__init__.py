"""The synthesizer stage of the query loop (see handler.py)."""
