"""The curaflow command line."""
