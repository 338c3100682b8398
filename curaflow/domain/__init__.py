"""Pure domain rules: cell state machine, terminal reasons, classification, projection.

Nothing in this package performs I/O, reads the clock or touches randomness, so the
workflow sandbox can import it (DESIGN.md decision 11).
"""
