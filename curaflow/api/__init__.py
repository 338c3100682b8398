"""The HTTP API: Workflow Protocol v1 job surface (FastAPI)."""
