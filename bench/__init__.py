"""Benchmarks (run on demand with `curaflow bench`)."""
