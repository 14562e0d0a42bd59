"""How the command line speaks: its name in usage lines, its one shape of error line, and
the versions and machine it reports. (The CLI is the only part of the package that prints.)"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

__all__ = ["certificates", "error", "machine", "program", "trust_for_verify_true", "versions"]


def program() -> str:
    """How the user invoked us, for usage lines: the script, or python -m."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m requests_fastssl" if name in ("", "__main__.py", "-c") else name


def error(message: str) -> None:
    """The one shape of an error line, as argparse writes its own: `prog: error: ...`."""
    print(f"{program()}: error: {message}", file=sys.stderr)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("requests", "urllib3", "certifi", "wrapt", "requests-fastssl"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> dict[str, Any]:
    import ssl

    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "openssl": ssl.OPENSSL_VERSION,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "versions": versions(),
    }


def trust_for_verify_true() -> tuple[str, str]:
    """The CA bundle requests would use for verify=True right now, and where it came from."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        value = os.environ.get(name)
        if value:
            return value, f"from {name}"
    import requests.adapters

    default: str = getattr(requests.adapters, "DEFAULT_CA_BUNDLE_PATH")  # noqa: B009 (not exported)
    return default, "requests' default (certifi)"


def certificates(source: str) -> str:
    """How big a trust source is: certificates in a file, entries in a directory."""
    if os.path.isdir(source):
        return f"{len(os.listdir(source))} entries"
    with open(source, "rb") as f:
        count = f.read().count(b"-----BEGIN CERTIFICATE-----")
    return f"{count} certificate{'' if count == 1 else 's'}"
