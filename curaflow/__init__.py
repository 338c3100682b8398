"""curaflow: durable candidate-search jobs on Temporal and PostgreSQL."""

__version__ = "0.1.0"
