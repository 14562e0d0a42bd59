"""What the shim tells an operator: ``REQUESTS_FASTSSL_LOG`` (the shim's log to stderr at a
level), one line at activation, one the first time each step-aside reason occurs with what
to do about it, and ``REQUESTS_FASTSSL_REPORT`` (the counters at exit, printed by the CLI's
``report``). Read at activation, so every activation mode honours both."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._policy import Reason

__all__ = ["ENV_LOG", "ENV_REPORT", "activated", "configure_from_env", "first_step_aside"]

ENV_LOG = "REQUESTS_FASTSSL_LOG"
ENV_REPORT = "REQUESTS_FASTSSL_REPORT"
_LEVELS = {"debug": 10, "info": 20, "warning": 30}
_FALSE_WORDS = ("", "0", "false", "no", "off")
_configured: list[Any] = []  # our handler, once
_report_registered: list[bool] = []

# What a user can do when a connection is left to stock, by reason code; reasons not named
# here need nothing (stock's path is the right one, and usually as fast).
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
    """Attach a stderr handler at the level ``REQUESTS_FASTSSL_LOG`` names (once per
    process); register the at-exit report if ``REQUESTS_FASTSSL_REPORT`` is on. Costs one
    environment lookup each when neither is set (start-up activation calls this)."""
    value = os.environ.get(ENV_LOG)
    if value is not None and value.strip() and not _configured:
        import logging

        logger = _logger()
        level = _LEVELS.get(value.strip().lower())
        if level is None:
            logger.warning(
                "requests_fastssl: %s=%r is not one of debug, info, warning; ignored",
                ENV_LOG,
                value,
            )
        else:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(level)
            logger.propagate = False  # the switch sends it to stderr, once, not twice
            _configured.append(handler)
    report = os.environ.get(ENV_REPORT)
    on = report is not None and report.strip().lower() not in _FALSE_WORDS
    if on and not _report_registered:
        import atexit

        _report_registered.append(True)
        atexit.register(_report)


def _report() -> None:
    from .cli.report import print_report

    print_report()


def activated(wrapped: str) -> None:
    """The one line at activation (INFO)."""
    if "logging" not in sys.modules:  # nobody configured a handler without importing it
        return
    logger = _logger()
    if logger.isEnabledFor(20):
        import ssl
        from importlib.metadata import version

        logger.info(
            "requests_fastssl: active in pid %d: wrapped urllib3.connection.%s "
            "(requests %s, urllib3 %s, %s)",
            os.getpid(),
            wrapped,
            version("requests"),
            version("urllib3"),
            ssl.OPENSSL_VERSION,
        )


def first_step_aside(reason: Reason) -> None:
    """The first connection left to stock for ``reason`` in this process (INFO)."""
    advice = ADVICE.get(reason.code)
    _logger().info(
        "requests_fastssl: a connection was left to stock requests (%s): %s%s "
        "(logged once per reason; stats().step_aside_reasons counts them)",
        reason.code,
        reason.text,
        f"; {advice}" if advice else "",
    )
