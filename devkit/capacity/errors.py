"""What the capacity meter raises when it cannot price a request."""

from __future__ import annotations


class MeterError(RuntimeError):
    """The meter cannot price a request (an unsupported operation, a lock that never freed)."""
