"""Developer and operator tools: the CLI, the demo, the emulator topology, the evaluation.

May import every other layer; nothing but ``services/gateway`` (the demo's sample feed)
imports them.
"""
