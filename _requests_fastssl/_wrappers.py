"""The wrapper on ``HTTPAdapter.cert_verify``: hand a pool a shared context, or step aside.

requests calls ``cert_verify(pool, url, verify, cert)`` before every request it sends; it is
where stock requests writes the pool's TLS attributes (``cert_reqs``, the CA paths, the
client certificate). The wrapper runs it untouched on the real pool, so every check, error
message and write is stock, then reads what it left: exactly what urllib3 will use for the
pool's next new connection. If sharing is possible, the pool gets the shared context built
for those values, in one dict write (``conn_kw["ssl_context"]``); otherwise any shared
context is taken back in one write, and the pool is stock. The pool keeps its CA and
certificate paths either way, so there is no moment at which a connection could see a
context without paths or paths without the context they were checked against: urllib3 still
"loads" the paths into the shared context on every new connection, and the frozen context
checks them instead (``_contexts``).

Nothing is added before requests asks the pool manager for a pool, so pools are keyed,
created and reused exactly as stock; a pool that never passes through ``cert_verify`` never
holds a shared context.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import weakref
from typing import Any

from ._compat import version_tuple
from ._contexts import build, spec_of
from ._keys import Spec
from ._owned import adopt
from ._registry import REGISTRY
from ._state import STATE

__all__ = ["cert_verify_wrapper", "class_reason", "detach_all"]

_log = logging.getLogger("requests_fastssl")
# Pools holding a shared context, so that uninstall() can hand them back to stock.
_attached: weakref.WeakSet[Any] = weakref.WeakSet()
_attached_lock = threading.Lock()
if hasattr(os, "register_at_fork"):  # (a thread of the parent may hold it when another forks)
    os.register_at_fork(after_in_child=_attached_lock._at_fork_reinit)  # type: ignore[attr-defined]


def _bind(conn: Any, url: Any, verify: Any, cert: Any) -> Any:
    return conn


def cert_verify_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)  # stock, on the real pool: its checks and errors
    if not STATE.active:
        return result
    if instance is None and args:  # called through the class's __dict__ entry, self first
        instance, args = args[0], args[1:]
    pool = _bind(*args, **kwargs)
    try:
        ctx, reason = _offer(instance, pool)
    except Exception:
        _log.exception("requests_fastssl: internal error; this pool goes to stock requests")
        ctx, reason = None, "internal-error"
    conn_kw = getattr(pool, "conn_kw", None)
    if not isinstance(conn_kw, dict):
        return result
    if ctx is not None:
        if conn_kw.get("ssl_context") is not ctx:
            _attach(pool, conn_kw, ctx)
    else:
        REGISTRY.step_aside(reason)
        if spec_of(conn_kw.get("ssl_context")) is not None:
            _detach(pool)
    return result


def _offer(adapter: Any, pool: Any) -> tuple[Any | None, str]:
    """The shared context for this pool as stock cert_verify left it, or why there is none."""
    target = STATE.target
    if target is None:
        return None, "not-patched"
    # The stock pool and connection classes: others may do anything with a context.
    if type(pool) not in target.pool_classes:
        return None, "pool-class"
    if getattr(pool, "ConnectionCls", None) not in target.connection_classes:
        return None, "connection-class"
    conn_kw = pool.conn_kw
    if conn_kw.get("ca_cert_data") is not None:
        return None, "ca-cert-data"
    # What urllib3 will pass to load_verify_locations (HTTPSConnection expands "~").
    ca_certs, ca_cert_dir = pool.ca_certs, pool.ca_cert_dir
    cafile = ca_certs and os.path.expanduser(ca_certs)
    capath = ca_cert_dir and os.path.expanduser(ca_cert_dir)
    current = conn_kw.get("ssl_context")
    if current is not None and spec_of(current) is None:
        # The adapter's, or requests 2.32.3/2.32.4's preloaded one: never shared, but its
        # CA file need not be loaded again on every connection (_owned).
        adopt(current, cafile, capath)
        return None, "own-context"
    cert_reqs = pool.cert_reqs
    if capath and cert_reqs != "CERT_NONE":
        # OpenSSL reads a CA directory's entries lazily, at verification, with the process's
        # rights then, and keeps what it read in the context: a shared context would answer
        # from entries a fresh one would read again (and maybe fail to). Stock's per
        # connection cost here is small: nothing is loaded up front.
        return None, "ca-directory"
    if not (cafile or capath) and cert_reqs != "CERT_NONE":
        import ssl

        if target.connection.resolve_cert_reqs(cert_reqs) != ssl.CERT_NONE:
            # Stock loads the system store for it, whose location OpenSSL reads from the
            # environment and its configuration: not something we can key.
            return None, "default-store"
    reason = class_reason(target.context_class())
    if reason:
        return None, reason
    if target.factory_replaced():
        return None, "factory-replaced"
    if not target.urllib3_v2 and _deprecated_protocol(target, pool.ssl_version):
        # 1.26 hands ssl_version to SSLContext() itself, which warns for the deprecated
        # protocols, and calls its factory once per connection object, not per connection:
        # the shim could not make those warnings stock's.
        return None, "ssl-version"
    password = getattr(pool, "key_password", None)
    if password is not None and not isinstance(password, str | bytes):
        # A callable: OpenSSL calls it at every load, and what it returns may change
        # (a rotated or revoked secret); a shared context would have called it once.
        return None, "key-password-callable"
    try:
        key = (
            cert_reqs,
            cafile,
            capath,
            pool.cert_file,
            pool.key_file,
            target.pool_tls(pool),
            target.settings(),
        )
        ctx = REGISTRY.get(key, _build)  # (builds catch their own errors)
    except (TypeError, KeyError):
        return None, "unhashable-setting"
    if ctx is None:
        return None, "build-failed"
    return ctx, ""


def _deprecated_protocol(target: Any, ssl_version: Any) -> bool:
    """Whether a 1.26 pool's ssl_version names a protocol other than the generic ones."""
    if ssl_version is None:
        return False
    import ssl

    try:
        resolved = target.connection.resolve_ssl_version(ssl_version)
    except Exception:
        return True
    return resolved not in (ssl.PROTOCOL_TLS, ssl.PROTOCOL_TLS_CLIENT)


def _build(key: tuple[Any, ...]) -> Any | None:
    return build(Spec._make(key), REGISTRY)


def _attach(pool: Any, conn_kw: dict[str, Any], ctx: Any) -> None:
    with _attached_lock:
        _attached.add(pool)
    conn_kw["ssl_context"] = ctx
    if not STATE.active:
        _detach(pool)  # uninstall() ran meanwhile and may have missed this pool


def _detach(pool: Any) -> None:
    conn_kw = pool.conn_kw
    if spec_of(conn_kw.get("ssl_context")) is not None:
        # One write: connections being set up right now keep the context they read, which
        # checks every step urllib3 takes, so they too end up as stock would.
        conn_kw["ssl_context"] = None
        REGISTRY.count("detaches")


def detach_all() -> None:
    """Hand every pool holding a shared context back to stock (uninstall)."""
    with _attached_lock:
        pools = list(_attached)
        _attached.clear()
    for pool in pools:
        _detach(pool)


# The SSLContext classes a shared context may be of: their wrap_socket does nothing but the
# handshake. (module, class name, the package whose __version__ must be recent enough)
# truststore's come first: inject_into_ssl() makes ssl.SSLContext its class too.
_KNOWN_CLASSES = (
    # truststore reconfigures an inner context on every handshake; before 0.10.4 it did so
    # without a lock (truststore commit f3143e2), so sharing one was unsafe.
    ("truststore._api", "SSLContext", "truststore"),
    ("pip._vendor.truststore._api", "SSLContext", "pip._vendor.truststore"),
    ("ssl", "SSLContext", None),
    ("urllib3.contrib.pyopenssl", "PyOpenSSLContext", None),
)
_class_reasons: dict[type, str] = {}


def class_reason(cls: type) -> str:
    """Empty if contexts of ``cls`` may be shared, else the step-aside reason."""
    reason = _class_reasons.get(cls)
    if reason is None:
        reason = "context-class"
        for module_name, name, package in _KNOWN_CLASSES:
            module = sys.modules.get(module_name)
            if getattr(module, name, None) is cls:
                version = getattr(sys.modules.get(package or ""), "__version__", "0")
                if package is not None and version_tuple(version) < (0, 10, 4):
                    reason = "context-class-version"
                elif package is not None and _loads_system_store(module):
                    reason = "truststore-openssl"
                else:
                    reason = ""
                break
        _class_reasons[cls] = reason
    return reason


def _loads_system_store(truststore_api: Any) -> bool:
    """Whether truststore verifies through OpenSSL here (Linux and other non-Apple, non-
    Windows systems): it then loads the system CA file into the context at every handshake,
    and OpenSSL's store only grows, so a shared context would go on trusting a CA removed
    from the system store since, where stock's fresh context would not."""
    configure = getattr(truststore_api, "_configure_context", None)
    return str(getattr(configure, "__module__", "")).endswith("._openssl")
