"""The throw-away PKI behind ``bench``, ``doctor``'s self-test and the tests' tools: a
trustme CA, and a bundle that is certifi's plus that CA, so a load costs what a real one does.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["INSTALL_HINT", "certifi_plus", "test_ca"]

# trustme is a test and benchmark dependency, not a run-time one.
INSTALL_HINT = "pip install trustme"


def test_ca() -> Any:
    """A fresh ``trustme.CA``; SystemExit with the install line when trustme is missing."""
    try:
        import trustme
    except ImportError:
        raise SystemExit(
            f"this needs trustme for a throw-away certificate authority: {INSTALL_HINT}"
        ) from None
    return trustme.CA()


def certifi_plus(ca: Any, folder: str, name: str = "bundle.pem") -> str:
    """Write certifi's bundle followed by ``ca``'s certificate to ``folder/name``; its path."""
    import certifi

    bundle = os.path.join(folder, name)
    with open(certifi.where(), "rb") as src, open(bundle, "wb") as dst:
        dst.write(src.read() + b"\n" + ca.cert_pem.bytes())
    return bundle
