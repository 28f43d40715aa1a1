"""Domain library for the sharded renewal-saga index (ADR-0085).

Pure where it can be; every AWS client is injected by the caller. Nothing here reads os.environ.
"""

__all__: list[str] = []
