"""The chaos suite: real faults under load on the embedded stack, then an audit of the truth.

``curaflow chaos [--quick]`` (:mod:`curaflow.cli.chaos`) runs the scenarios of
:mod:`bench.chaos.scenarios` on separate processes (PostgreSQL, the Temporal dev server,
worker processes, the API, the Pixiv replay server, a recording webhook receiver) and
prints one table (:mod:`bench.chaos.runner`); :mod:`bench.chaos.audit` holds the rules
that compare what the routes received with what the ledger and every job report.
"""
