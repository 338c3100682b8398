"""The plumbing every layer may use: logs, metric families, tracing, supervised background loops."""
