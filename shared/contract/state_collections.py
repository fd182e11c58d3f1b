"""Names of the state store's collections (Firestore collections in gcp)."""

FEEDS = "feeds"  # one per feed URL: etag, last_modified, last_poll, last_error
PROCESSED_ITEMS = "processed_items"  # one per (feed, guid) or file: content hash, status
PAGES = "pages"  # one per web page (normalised URL): which listings' ledger records hold it, its document id
DOCUMENTS = "documents"  # one per indexed document: title, url, hash, chunk ids
CONVERSATIONS = "conversations"  # one per conversation: its turns' query ids, oldest first
QUERIES = "queries"  # one per query: status, iterations, best result, answer
DEAD_LETTERS = "dead_letters"  # messages that could not be handled, with the reason
MODEL_HEALTH = "model_health"  # one per model the API refused: status, reason, when, trace
