"""The ProxyFL evaluation (proxyfl.txt §4.1–4.2): data splits, runs and scores on offline data."""

__all__: list[str] = []
