"""What an operator sees, read at activation so every mode honours it: ``REQUESTS_FASTSSL_LOG``
(our log on stderr), ``REQUESTS_FASTSSL_REPORT`` (counters at exit, ``report``), and the log
lines."""

from __future__ import annotations

import os
import sys

from ._state import LOCK, STATE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._policy import Reason

ENV_LOG, ENV_REPORT = "REQUESTS_FASTSSL_LOG", "REQUESTS_FASTSSL_REPORT"
_LEVELS = {"debug": 10, "info": 20, "warning": 30}
ON_WORDS, OFF_WORDS = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
_done: set[str] = set()  # what configure_from_env did, and the values warned about, once

# What a user can do, by reason code; a reason not named needs nothing.
ADVICE = {
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
    "no-procfs": "mount procfs at /proc (containers have it by default) to share",
    "build-failed": "stock raised its own error for these files; fix the files",
    "urllib3-1.26": "upgrade to urllib3 2.x to share contexts",
    "internal-error": "please report it with the traceback logged above",
}
_GIVEN = (  # own-context, by whether the shim serves its CA load (the reason's text says it does)
    "never shared; stock makes every load into it (not the standard library's class or load, a "
    "CA directory or CA data, no CA file, or one the shim cannot read)",
    "never shared; the CA loads it holds already are left out: its CA file is loaded once per "
    "contents instead of at every new connection",
)


def _logger() -> Any:
    import logging

    return logging.getLogger("requests_fastssl")


def switch(name: str, *, unknown: bool) -> bool:
    """The one reader of every on/off switch: 1/true/yes/on, 0/false/no/off or unset (any case,
    spaces around); any other value gets one warning and ``unknown``, that switch's safe side."""
    value = os.environ.get(name, "").strip().lower()
    if value in ON_WORDS or value in OFF_WORDS:
        return value in ON_WORDS
    _warn_once(name, f"{'on' if unknown else 'off'} (1/true/yes/on or 0/false/no/off)")
    return unknown


def _warn_once(name: str, taken: str) -> None:
    if name not in _done:
        _done.add(name)
        import contextlib

        with contextlib.suppress(Exception):  # (an application's filter may raise)
            value = os.environ.get(name, "")
            _logger().warning(
                "requests_fastssl: %s=%r is not understood; taken as %s", name, value, taken
            )


def configure_from_env() -> None:
    """One environment lookup each when neither switch is set (start-up calls this)."""
    value = os.environ.get(ENV_LOG, "").strip()
    if value.lower() not in OFF_WORDS and "log" not in _done:
        _done.add("log")
        import logging

        level = _LEVELS.get(value.lower())
        if level is None:
            _warn_once(ENV_LOG, "off (debug, info, warning, or 0/false/no/off)")
        else:
            handler, logger = logging.StreamHandler(sys.stderr), _logger()
            handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(level)
            logger.propagate = False  # the switch sends it to stderr, once, not twice
            _done.add("on")
    if "report" not in _done and switch(ENV_REPORT, unknown=False):
        _done.add("report")
        import atexit

        atexit.register(report)


def _level() -> int:
    """INFO with the switch on, else DEBUG: an application at INFO sees nothing it did not ask
    for (stock requests says nothing there)."""
    return 20 if "on" in _done else 10


def activated(wrapped: str) -> None:
    """The one line at activation; versions from the modules, not package metadata (a frozen
    application has none, and reading it opens files stock never opens)."""
    import contextlib

    with contextlib.suppress(Exception):  # (never a failed activation)
        if "logging" in sys.modules and _logger().isEnabledFor(_level()):
            import ssl

            versions = [_version("requests"), _version("urllib3")]
            _logger().log(
                _level(),
                "requests_fastssl: active in pid %d: wrapped urllib3.connection.%s (%s, %s, %s)",
                *(os.getpid(), wrapped, *versions, ssl.OPENSSL_VERSION),
            )


def _version(package: str) -> str:
    """``package``'s version as far as this process knows it: activation often comes first
    (the recommended order) or inside urllib3's import, before requests' version module ran,
    and importing it here would import what the program has not."""
    for source in (f"{package}.__version__", f"{package}._version", package):
        version = getattr(sys.modules.get(source), "__version__", None)
        if isinstance(version, str):
            return f"{package} {version}"
    if package in sys.modules:
        return f"{package} being imported"
    return f"{package} not imported yet"


def warn_unsupported(reason: str) -> None:
    """The one warning that urllib3 is left stock, and why (with the lock)."""
    if not STATE.warned:
        STATE.warned = True
        _logger().warning("requests_fastssl: leaving urllib3 (and requests) stock: %s", reason)


def unknown_code() -> None:
    """Where urllib3's TLS code is not tabled, ``status()`` says so and it warns once; read at
    the first connection left to stock for it, or by ``status()`` (activation inside urllib3's
    import does not read it)."""
    from ._genuine import unknown_code_reason

    # Bounded: a connection may come here; if install() or status() holds the lock that long,
    # status() says it when next asked.
    if not LOCK.acquire(True, 5.0):
        return
    try:
        if STATE.active and STATE.phase == "active":
            reason = unknown_code_reason()
            if reason is not None:
                STATE.phase, STATE.reason = "unsupported", reason
                warn_unsupported(reason)
    finally:
        LOCK.release()


def first_step_aside(reason: Reason, served: bool = False) -> None:
    """The first connection left to stock for ``reason`` in this process; ``served``: the first
    given a context whose CA load the shim serves (own-context), which is not left to stock."""
    import contextlib

    if reason.code == "unknown-code":
        unknown_code()
        return

    advice = ADVICE.get(reason.code)
    text = _GIVEN[served] if reason.code == "own-context" else reason.text
    stock = "stock requests" if "requests" in sys.modules else "stock urllib3"  # (boto3 alone)
    what, counter = f"was left to {stock}", "step_aside_reasons"
    if served:
        what, counter = "was given its caller's own SSLContext", "owned_connections"
    # An application's log filter may raise: never into the connection stock then makes.
    with contextlib.suppress(Exception):
        _logger().log(
            _level(),
            "requests_fastssl: a connection %s (%s): %s%s "
            "(logged once per reason; stats().%s counts them)",
            *(what, reason.code, text, f"; {advice}" if advice else "", counter),
        )


def report() -> None:
    """The at-exit line of ``REQUESTS_FASTSSL_REPORT`` (a process that imported urllib3): here,
    as the core never imports the command line; written, not logged (logging may be shut down)."""
    httpx = sys.modules.get("_requests_fastssl._httpx")  # (httpx's transports: active too)
    if "urllib3.connection" not in sys.modules and httpx is None:  # (else nothing to say)
        return
    from ._state import STATE
    from ._status import Stats

    registry = sys.modules.get("_requests_fastssl._registry")
    if STATE.active or (httpx is not None and httpx.active()):
        found = registry.REGISTRY.stats() if registry is not None else Stats()
        if httpx is not None:
            found = found._replace(httpx_step_aside_reasons=httpx.reasons())
        said = str(found)
    else:
        state = f"{STATE.phase}: {STATE.reason}" if STATE.reason else STATE.phase
        said = f"the shim was not active ({state})"
    argv = getattr(sys, "argv", [])  # (an embedding application may have none)
    command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))
    where = f"pid {os.getpid()}, {command or sys.executable}"
    sys.stderr.write(f"requests_fastssl report ({where}): {said}\n")
    sys.stderr.flush()
