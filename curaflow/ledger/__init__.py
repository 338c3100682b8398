"""The PostgreSQL ledger: jobs, cells, delivery intents, events, outcome records.

The ledger is the projection ``GET /jobs/{id}`` answers from even when no worker runs
(DESIGN.md decision 3). Every activity writes its own cell transition here in the same
transaction as its effect.
"""
