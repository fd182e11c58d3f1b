"""The transformer stage of the query loop (see handler.py)."""
