"""The replay server of recorded Pixiv app-api responses (offline default source)."""

#: The port the replay server listens on unless told (``python -m curaflow.sources.pixiv.replay
#: --port``), and the one ``curaflow dev`` serves its own replay on in replay mode
#: (``curaflow.cli.stack.DevPorts.replay``).
DEFAULT_PORT = 8300
