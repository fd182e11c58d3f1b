"""The grader stage of the query loop (see handler.py)."""
