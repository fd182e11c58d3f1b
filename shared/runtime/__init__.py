"""Wiring: which stage consumes which topic, the dependencies handlers receive,
and the loop that feeds bus deliveries to handlers in the embedded runtime."""
