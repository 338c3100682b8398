"""Benchmark scenarios; each exposes ``async def run(services, quick) -> Result``."""
