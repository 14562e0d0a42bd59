"""The exceptions requests_fastssl raises; everything else it lets requests raise."""

from __future__ import annotations

__all__ = ["FrozenContextError", "RequestsFastSSLError", "UnsupportedVersionError"]


class RequestsFastSSLError(Exception):
    """Base class of the errors raised by requests_fastssl itself."""


class UnsupportedVersionError(RequestsFastSSLError):
    """``install(strict=True)`` found a requests/urllib3 it cannot patch safely."""


class FrozenContextError(RequestsFastSSLError, RuntimeError):
    """Something tried to change an SSLContext that requests_fastssl shares between pools: a
    RuntimeError, which urllib3 and requests neither catch nor turn into another error."""
