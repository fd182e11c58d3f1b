"""Feed poller stage: polls RSS/Atom feeds and announces new, changed and removed items."""
