"""Logs, metrics, ledger gauges and tracing of every curaflow process."""
