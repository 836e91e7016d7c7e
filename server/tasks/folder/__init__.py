"""Task folders: a user's own script plus `autoresearch.toml`, registered by the operator."""
