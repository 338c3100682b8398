"""What a running curaflow process is made of: the worker, source-queue owners, telemetry, its HTTP endpoints."""
