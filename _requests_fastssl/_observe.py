"""What the shim tells an operator, read at activation so every activation mode honours it:
``REQUESTS_FASTSSL_LOG`` (the shim's log to stderr at a level: activation, and the first
step-aside per reason with what to do), ``REQUESTS_FASTSSL_REPORT`` (counters at exit)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._policy import Reason

ENV_LOG, ENV_REPORT = "REQUESTS_FASTSSL_LOG", "REQUESTS_FASTSSL_REPORT"
_LEVELS = {"debug": 10, "info": 20, "warning": 30}
_done: set[str] = set()  # what configure_from_env did once per process

# What a user can do, by reason code; a reason not named needs nothing.
ADVICE = {
    "own-context": "nothing to do: the shim still avoids re-loading that context's CA file",
    "ca-directory": "a CA directory costs stock little per connection; a bundle file shares",
    "default-store": "pass verify=<a CA bundle file> (certifi.where()) to share",
    "context-class": "pyOpenSSL/truststore/a patched SSLContext class: the shim cannot help",
    "context-patched": "something replaced a method of ssl.SSLContext; remove it to share",
    "urllib3-replaced": "a library wrapped urllib3's context functions; the shim steps aside",
    "deprecated-version": "use TLS 1.2 or later as the version bound",
    "ssl-version": "use ssl_minimum_version / ssl_maximum_version instead of ssl_version",
    "key-log": "unset SSLKEYLOGFILE outside debugging sessions",
    "key-password-callable": "pass the key password as a string",
    "not-a-file": "point verify/cert at regular, readable files",
    "build-failed": "stock raised its own error for these files; fix the files",
    "urllib3-1.26": "upgrade to urllib3 2.x to share contexts",
    "internal-error": "please report it with the traceback logged above",
}


def _logger() -> Any:
    import logging

    return logging.getLogger("requests_fastssl")


def configure_from_env() -> None:
    """One environment lookup each when neither switch is set (start-up calls this)."""
    value = os.environ.get(ENV_LOG, "").strip()
    if value and "log" not in _done:
        _done.add("log")
        import logging

        level = _LEVELS.get(value.lower())
        if level is None:
            msg = "requests_fastssl: %s=%r is not one of debug, info, warning; ignored"
            _logger().warning(msg, ENV_LOG, value)
        else:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
            logger = _logger()
            logger.addHandler(handler)
            logger.setLevel(level)
            logger.propagate = False  # the switch sends it to stderr, once, not twice
    report = os.environ.get(ENV_REPORT, "").strip().lower()
    if report not in ("", "0", "false", "no", "off") and "report" not in _done:
        _done.add("report")
        import atexit

        atexit.register(_report)


def _report() -> None:
    from .cli.report import print_report

    print_report()


def activated(wrapped: str) -> None:
    """The one line at activation (INFO)."""
    if "logging" in sys.modules and _logger().isEnabledFor(20):
        import contextlib
        import ssl
        from importlib.metadata import version

        said = (os.getpid(), wrapped, version("requests"), version("urllib3"), ssl.OPENSSL_VERSION)
        with contextlib.suppress(Exception):  # (as below: never a failed activation)
            _logger().info(
                "requests_fastssl: active in pid %d: wrapped urllib3.connection.%s "
                "(requests %s, urllib3 %s, %s)",
                *said,
            )


def first_step_aside(reason: Reason) -> None:
    """The first connection left to stock for ``reason`` in this process (INFO)."""
    import contextlib

    advice = ADVICE.get(reason.code)
    # An application's log filter may raise: never into the connection stock then makes.
    with contextlib.suppress(Exception):
        _logger().info(
            "requests_fastssl: a connection was left to stock requests (%s): %s%s "
            "(logged once per reason; stats().step_aside_reasons counts them)",
            *(reason.code, reason.text, f"; {advice}" if advice else ""),
        )
