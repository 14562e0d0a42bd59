"""The exceptions requests_fastssl raises; everything else it lets requests raise."""

from __future__ import annotations

__all__ = ["FrozenContextError", "RequestsFastSSLError", "UnsupportedVersionError"]


class RequestsFastSSLError(Exception):
    """Base class of the errors raised by requests_fastssl itself."""


class UnsupportedVersionError(RequestsFastSSLError):
    """``install(strict=True)`` found a requests/urllib3 it cannot patch safely."""


class FrozenContextError(RequestsFastSSLError, RuntimeError):
    """Something tried to change an SSLContext that requests_fastssl shares between pools.

    A RuntimeError on purpose: urllib3 and requests do not catch it, so a mutation that
    would change trust or identity for other connections fails loudly instead of being
    retried or turned into a different error.
    """
