"""One module per user-facing feature; each exposes ``register(server)``."""
