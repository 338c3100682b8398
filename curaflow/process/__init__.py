"""What a running curaflow process is made of: the worker, its loops' supervision, its HTTP endpoints."""
