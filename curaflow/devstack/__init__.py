"""The embedded stack (Temporal dev server, PostgreSQL, workers, API) for local use and tests."""
