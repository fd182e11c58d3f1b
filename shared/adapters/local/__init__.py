"""The embedded runtime's adapters: SQLite bus and state, folder blobs, local index and models."""
