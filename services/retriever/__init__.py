"""The retriever stage of the query loop (see handler.py)."""
