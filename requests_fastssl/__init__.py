"""requests-fastssl: requests without a CA bundle load on every new connection.

``import requests_fastssl`` installs the shim (as does ``requests_fastssl.install()``):
requests then shares one ready-made, immutable ``SSLContext`` per distinct TLS
configuration instead of having urllib3 load the CA bundle into a new context for every
connection. What requests verifies, trusts and sends does not change; whenever sharing
could change it, the shim steps aside and stock requests does the work.

    import requests_fastssl          # installs; patches requests when it is imported
    requests_fastssl.status()        # Status(state=<State.ACTIVE ...>, reason='')
    requests_fastssl.stats()         # Stats(contexts_built=1, reuses=29, ca_loads=1, ...)
    requests_fastssl.warm()          # build verify=True's context now (start-up, prefork)
    requests_fastssl.uninstall()     # back to stock requests

``REQUESTS_FASTSSL_DISABLE=1`` in the environment makes ``install()`` a no-op.
See README.md for the rules and what the shim never does.

PYTEST_DONT_REWRITE: start-up activation imports this package before pytest starts, and
pytest (which finds our plugin in the same distribution) would warn that it cannot rewrite
asserts in it, a warning that aborts suites run with ``filterwarnings = error``. There are
no asserts here to rewrite.
"""

from __future__ import annotations

from _requests_fastssl import __version__
from _requests_fastssl._errors import (
    FrozenContextError,
    RequestsFastSSLError,
    UnsupportedVersionError,
)
from _requests_fastssl._install import activate as _activate
from _requests_fastssl._install import clear, install, stats, status, uninstall

# State, Status and Stats live in a module that imports enum and typing, which cost more
# start-up time than the rest of the shim: they are loaded on first use (PEP 562).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from _requests_fastssl._status import State, Stats, Status
    from _requests_fastssl._warm import warm

__all__ = [
    "FrozenContextError",
    "RequestsFastSSLError",
    "State",
    "Stats",
    "Status",
    "UnsupportedVersionError",
    "__version__",
    "clear",
    "install",
    "stats",
    "status",
    "uninstall",
    "warm",
]


def __dir__() -> list[str]:
    """The module's names with those loaded on first use: dir() and completion show them."""
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> object:
    if name in ("State", "Stats", "Status"):
        from _requests_fastssl import _status

        return getattr(_status, name)
    if name == "warm":  # loaded on first use too: start-up activation never needs it
        from _requests_fastssl._warm import warm

        return warm
    raise AttributeError(f"module 'requests_fastssl' has no attribute {name!r}")


_activate()  # install() minus its return value, whose type is costly to import at start-up
del _activate, TYPE_CHECKING, annotations  # not API (a namespace as tidy as truststore's)
