"""Sources of works: the Pixiv app-api client, the candidate scan and the replay server."""
