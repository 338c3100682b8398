"""The replay server of recorded Pixiv app-api responses (offline default source)."""
