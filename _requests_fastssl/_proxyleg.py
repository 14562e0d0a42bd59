"""The TLS leg to an HTTPS proxy: a shared context for it, in place of urllib3's fresh one.

Through an HTTPS proxy (``proxies={"https": "https://proxy"}``) every new connection of a
pool is TLS twice: to the proxy, then through it to the server. The server's leg uses the
pool's context, shared like any other (``_wrappers``). The proxy's leg has none: urllib3
2.x's ``_connect_tls_proxy`` creates a fresh context from the pool's ``cert_reqs`` and TLS
versions, writes ``verify_mode`` (and ``check_hostname`` for the proxy's host checks), and
``ssl_wrap_socket`` loads the pool's CA file into it: one load per connection.

Here that leg gets a shared context built from the same inputs, keyed like any other: the
connection's ``cert_reqs``, CA file and TLS versions, the proxy's ``assert_hostname`` /
``assert_fingerprint`` (from ``ProxyConfig``), and never a client certificate (urllib3 sends
none to a proxy). urllib3 still takes every step as stock; what changes is only the object
the CA load, ALPN and handshake happen on, swapped in ``ssl_wrap_socket`` after the fresh
context's settings are found equal to the shared one's. The frozen context then checks the
load (same path, file unchanged) and the handshake as for any connection, and anything
unexpected gives that connection a private, stock-built context.

Only for connections of pools holding a shared context (they went through requests'
``cert_verify``), verifying against a CA file, on urllib3 2.x: 1.26 sets up this leg in
another way, which is left stock.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ._contexts import build, open_setup, spec_of
from ._keys import Spec
from ._registry import REGISTRY
from ._state import STATE

__all__ = ["connect_tls_proxy_wrapper", "take"]

_log = logging.getLogger("requests_fastssl")
_local = threading.local()

# What a fresh context must have exactly as the shared one for the swap: everything
# urllib3's factory and its writes before the load set (and OpenSSL's defaults behind them).
_COMPARED = (
    "protocol",
    "verify_mode",
    "check_hostname",
    "options",
    "verify_flags",
    "minimum_version",
    "maximum_version",
    "hostname_checks_common_name",
    "post_handshake_auth",
    "keylog_filename",
    "security_level",
)
_MISSING = object()


def connect_tls_proxy_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    shared = None
    if STATE.active and instance is not None:
        try:
            shared = _shared_for(instance)
        except Exception:
            _log.exception("requests_fastssl: internal error; this proxy leg goes to stock")
    if shared is None:
        return wrapped(*args, **kwargs)
    _local.pending = shared
    try:
        return wrapped(*args, **kwargs)
    finally:
        _local.pending = None


def take(fresh: Any) -> Any | None:
    """The shared context to load and handshake with instead of ``fresh``, the context
    urllib3 just made for the proxy leg this thread is setting up; None to stay stock."""
    shared = getattr(_local, "pending", None)
    if shared is None:
        return None
    _local.pending = None  # one leg per _connect_tls_proxy call
    if not STATE.active or type(fresh) is not type(shared).__bases__[0]:
        return None
    for name in _COMPARED:
        if getattr(fresh, name, _MISSING) != getattr(shared, name, _MISSING):
            REGISTRY.step_aside("proxy-leg-settings")
            return None
    open_setup(shared)  # what urllib3's verify_mode write opens on the context it is given
    REGISTRY.count("proxy_legs")
    return shared


def _shared_for(conn: Any) -> Any | None:
    """The shared context for ``conn``'s proxy leg, or None (stock)."""
    target = STATE.target
    if (
        target is None
        or not target.urllib3_v2
        or type(conn) not in target.connection_classes
        # The pool went through cert_verify, and holds what it left.
        or spec_of(getattr(conn, "ssl_context", None)) is None
    ):
        return None
    config = conn.proxy_config
    if config is None or config.ssl_context is not None or conn.proxy_is_forwarding:
        return None  # no proxy leg of its own, or one with the user's context
    cafile = conn.ca_certs
    if not cafile or not isinstance(cafile, str) or conn.ca_cert_dir or conn.ca_cert_data:
        return None  # a CA directory, data, or no CA file: as _wrappers, stock
    import ssl

    cert_reqs = conn.cert_reqs
    if target.connection.resolve_cert_reqs(cert_reqs) == ssl.CERT_NONE:
        # Not verifying: urllib3 loads the system store into the fresh context before the
        # point where it could be swapped, so there is nothing to save.
        return None
    from ._compat import NO_POOL_TLS, PoolTLS
    from ._wrappers import class_reason

    if class_reason(target.context_class()) or target.factory_replaced():
        return None
    tls = PoolTLS(
        ssl_version=conn.ssl_version,
        ssl_minimum_version=conn.ssl_minimum_version,
        ssl_maximum_version=conn.ssl_maximum_version,
        assert_hostname=config.assert_hostname,
        assert_fingerprint=config.assert_fingerprint,
    )
    if tls == NO_POOL_TLS:
        tls = NO_POOL_TLS
    try:
        # No client certificate: the same key as a server leg's without one, so a pool
        # without a client certificate uses one context for both legs.
        key = (cert_reqs, cafile, None, None, None, tls, target.settings())
        return REGISTRY.get(key, _build)
    except (TypeError, KeyError):
        return None


def _build(key: tuple[Any, ...]) -> Any | None:
    return build(Spec._make(key), REGISTRY)
