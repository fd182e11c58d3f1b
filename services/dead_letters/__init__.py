"""Records the messages Pub/Sub dead-lettered and ends their queries."""
