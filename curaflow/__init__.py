"""curaflow: durable candidate-search jobs on Temporal and PostgreSQL."""

from curaflow import moved as _moved

__version__ = "0.1.0"

# Import paths moved by a reorganisation keep working for a release (curaflow.moved).
_moved.install()
