"""The gcp runtime's adapters: Pub/Sub, Firestore, GCS, Vertex AI / Gemini."""
