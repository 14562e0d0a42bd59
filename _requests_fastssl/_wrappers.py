"""The two wrappers on requests' TLS hooks, and every rule for when to step aside.

``request_context_wrapper`` wraps ``requests.adapters._urllib3_request_context``: it lets
requests compute the stock pool kwargs, and when sharing is provably equivalent it adds a
shared context from the registry. The stock kwargs stay in (``ca_certs``, ``cert_file``,
...), so the pool key always separates what stock requests separates (CVE-2024-35195),
even if a subclass later swaps the context for its own.

``cert_verify_wrapper`` wraps ``HTTPAdapter.cert_verify``: for a pool holding one of our
contexts it runs the stock ``cert_verify`` against a stand-in (every stock check and error
message stays), proves the result is exactly what the context was built for, and only then
clears the CA and client-certificate paths from the real pool, so urllib3 never loads
anything into a shared context. Anything short of proof hands the pool back to stock
behaviour ("detach") before any connection is made. Pools without our context get the
stock ``cert_verify`` untouched.

Everything here runs per request, so the common path is attribute reads and one registry
lookup; the rare paths (proxies, subclasses, foreign managers) pay for their own checks.
"""

from __future__ import annotations

import logging
import operator
import os
import sys
from types import ModuleType
from typing import Any

from . import _install
from ._contexts import build, expected_keylog, spec_of
from ._keys import Spec, file_identity, trust_identity
from ._registry import REGISTRY

__all__ = ["cert_verify_wrapper", "prepare", "request_context_wrapper", "unsupported_reason"]

_log = logging.getLogger("requests_fastssl")

MIN_REQUESTS = (2, 32, 3)
# Pool-manager kwargs that configure TLS. A manager carrying any of them has its own idea of
# TLS that a shared context would override (R3, R3b, R3c, R3d, R6): we step aside.
MANAGER_TLS_KEYS = frozenset(
    {
        "ssl_context",
        "ssl_version",
        "ssl_minimum_version",
        "ssl_maximum_version",
        "ca_certs",
        "ca_cert_dir",
        "ca_cert_data",
        "cert_file",
        "key_file",
        "key_password",
        "cert_reqs",
        "assert_hostname",
        "assert_fingerprint",
    }
)
# The stock pool kwargs we understand; anything else in them means "not ours to judge".
_STOCK_KWARGS = frozenset({"cert_reqs", "ca_certs", "ca_cert_dir", "cert_file", "key_file"})
# Pool attributes requests' cert_verify writes, in the order the stand-in reports them.
_VERIFY_ATTRS = ("cert_reqs", "ca_certs", "ca_cert_dir", "cert_file", "key_file")
# Pool attributes a shared context cannot embody: urllib3 reads them per connection.
_POOL_TLS_ATTRS = (
    "key_password",
    "ssl_version",
    "ssl_minimum_version",
    "ssl_maximum_version",
    "assert_hostname",
    "assert_fingerprint",
)
_ARGNAMES_CONTEXT = ("request", "verify", "client_cert", "poolmanager")
_ARGNAMES_VERIFY = ("self", "conn", "url", "verify", "cert")


class _Target:
    """Facts about the patched requests and urllib3, read once when patching."""

    def __init__(self, adapters: ModuleType) -> None:
        import urllib3
        import urllib3.connection
        import urllib3.connectionpool
        from urllib3.util import ssl_

        self.adapters = adapters
        self.http_adapter: type = adapters.HTTPAdapter
        self.ssl_ = ssl_
        self.connection = urllib3.connection
        self.urllib3_v2 = getattr(urllib3, "__version__", "").split(".")[0] == "2"
        self.pool_classes = {urllib3.connectionpool.HTTPSConnectionPool}
        self.connection_classes = {urllib3.connection.HTTPSConnection}
        codenames = _unwrapped(adapters.HTTPAdapter.cert_verify).__code__.co_names
        # requests >= 2.32.5 points cert_verify at the default bundle for verify=True (2.32.5
        # through extract_zipped_paths). 2.32.3 and 2.32.4 instead share the context they
        # built at import (_preloaded_ssl_context): the cache requests later reverted. Their
        # verify=True requests stay stock: already shared, so nothing to gain, and that
        # context's trust was fixed at import, which a context built now could not match.
        self.shares_default = "DEFAULT_CA_BUNDLE_PATH" in codenames
        self.default_extracts = "extract_zipped_paths" in codenames
        # The pool attributes a shared context cannot embody, read in one C-level call;
        # urllib3 1.26 pools have no ssl_minimum_version / ssl_maximum_version.
        present = [
            name
            for name in _POOL_TLS_ATTRS
            if hasattr(urllib3.connectionpool.HTTPSConnectionPool("localhost"), name)
        ]
        self.pool_tls_attrs = operator.attrgetter(*present)
        self.no_pool_tls_attrs = (None,) * len(present)

    def default_bundle(self) -> str:
        """The CA location requests uses for verify=True, read now (R8, R14)."""
        location: str = self.adapters.DEFAULT_CA_BUNDLE_PATH
        if self.default_extracts:
            location = self.adapters.extract_zipped_paths(location)
        return location


_target: _Target | None = None


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _unwrapped(func: Any) -> Any:
    """The function under any wrappers (wrapt or functools.wraps)."""
    for _ in range(64):
        inner = getattr(func, "__wrapped__", None)
        if inner is None:
            break
        func = inner
    return func


def _argnames(func: Any) -> tuple[str, ...]:
    code = getattr(_unwrapped(func), "__code__", None)
    if code is None:
        return ()
    names: tuple[str, ...] = code.co_varnames[: code.co_argcount]
    return names


def unsupported_reason(adapters: ModuleType) -> str | None:
    """Why the imported requests cannot be patched safely, or None if it can."""
    requests_version = getattr(sys.modules.get("requests.__version__"), "__version__", "")
    if not requests_version or _version(requests_version) < MIN_REQUESTS:
        return f"requests {requests_version or '(unknown version)'} is older than 2.32.3"
    if _version(requests_version)[0] >= 3:
        return f"requests {requests_version} is newer than the 2.x line this shim knows"
    import urllib3

    urllib3_version = getattr(urllib3, "__version__", "")
    if _version(urllib3_version) < (1, 26) or _version(urllib3_version)[0] >= 3:
        return f"urllib3 {urllib3_version} is outside 1.26.x-2.x"
    try:  # (urllib3 1.26 defines a stand-in SSLContext class when ssl is missing)
        import ssl  # noqa: F401
    except ImportError:
        return "this Python has no ssl module"
    func = getattr(adapters, "_urllib3_request_context", None)
    if _argnames(func) != _ARGNAMES_CONTEXT:
        return "requests.adapters._urllib3_request_context is missing or has a new signature"
    adapter = getattr(adapters, "HTTPAdapter", None)
    if _argnames(getattr(adapter, "cert_verify", None)) != _ARGNAMES_VERIFY:
        return "requests.adapters.HTTPAdapter.cert_verify is missing or has a new signature"
    try:
        import wrapt
    except ImportError:
        return "wrapt is not installed"
    if not hasattr(wrapt, "unwrap_object"):
        return f"wrapt {getattr(wrapt, '__version__', '?')} is older than 2.4"
    return None


def prepare(adapters: ModuleType) -> None:
    """Read the facts the wrappers need about this requests/urllib3 (after the checks)."""
    global _target
    _target = _Target(adapters)


# --- wrapper 1: requests.adapters._urllib3_request_context -----------------------------------


def request_context_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    result = wrapped(*args, **kwargs)
    if not _install.STATE.active:
        return result
    try:
        host_params, pool_kwargs = result
        if host_params.get("scheme") != "https":
            return result  # http pools drop every TLS kwarg: nothing to share
        ctx = _shared_context(pool_kwargs, *args, **kwargs)
    except Exception:
        _log.exception("requests_fastssl: internal error; this request goes to stock requests")
        ctx = None
    if ctx is None:
        REGISTRY.count("step_asides")
    else:
        pool_kwargs["ssl_context"] = ctx
    return result


def _shared_context(
    pool_kwargs: dict[str, Any], request: Any, verify: Any, client_cert: Any, poolmanager: Any
) -> Any | None:
    key = _key_for(pool_kwargs, verify, client_cert, poolmanager)
    return None if key is None else REGISTRY.get(key, _build)


def _build(key: tuple[Any, ...]) -> Any | None:
    return build(Spec._make(key), REGISTRY)


def _key_for(
    pool_kwargs: dict[str, Any], verify: Any, cert: Any, manager: Any
) -> tuple[Any, ...] | None:
    """The key (a ``Spec`` as a plain tuple: cheaper to build and hash) of the context stock
    urllib3 would end up with, or None to step aside."""
    target = _target
    if target is None:
        return None
    # A context handed out is only safe if our cert_verify wrapper runs last on every pool:
    # with another layer above it (or cert_verify replaced) pools would be detached anyway,
    # or worse, reach urllib3 with CA paths still set.
    if target.http_adapter.__dict__.get("cert_verify") is not _install.STATE.cert_verify_handle:
        return None
    base = getattr(manager, "connection_pool_kw", None)
    if not isinstance(base, dict):
        return None
    if not MANAGER_TLS_KEYS.isdisjoint(base) and any(
        base[k] is not None for k in MANAGER_TLS_KEYS.intersection(base)
    ):
        return None
    for key in pool_kwargs:
        if key not in _STOCK_KWARGS:
            return None

    cafile: str | None
    capath: str | None
    expected_ca: tuple[str | None, str | None]
    if verify is False:
        cert_reqs, cafile, capath, expected_ca = "CERT_NONE", None, None, (None, None)
    elif verify is True:
        if not target.shares_default:
            return None
        cert_reqs = "CERT_REQUIRED"
        location = target.default_bundle()
        if not isinstance(location, str) or not location or location.startswith("~"):
            return None
        cafile, capath = (None, location) if os.path.isdir(location) else (location, None)
        expected_ca = (cafile, capath)
    elif type(verify) is str and verify and not verify.startswith("~"):
        # urllib3 expands "~" in CA paths after requests checked the unexpanded one exists:
        # a mismatch we do not try to reproduce, so such paths go stock.
        cert_reqs = "CERT_REQUIRED"
        if pool_kwargs.get("ca_cert_dir") == verify:
            cafile, capath = None, verify
        elif pool_kwargs.get("ca_certs") == verify:
            cafile, capath = verify, None
        else:
            return None
        expected_ca = (cafile, capath)
    else:
        return None  # None, "", bytes, pathlib.Path, ...: stock semantics are unusual there
    if pool_kwargs.get("cert_reqs") != cert_reqs:
        return None

    if cert is None:
        cert_file, key_file = None, None
    elif type(cert) is str and cert:
        cert_file, key_file = cert, None
    elif (
        type(cert) is tuple and len(cert) == 2 and all(type(part) is str and part for part in cert)
    ):
        cert_file, key_file = cert
    else:
        return None
    if pool_kwargs.get("cert_file") != cert_file or pool_kwargs.get("key_file") != key_file:
        return None
    if cert_file is None:
        client_id: tuple[Any, ...] = ()
    elif key_file is None:
        client_id = (file_identity(cert_file),)
    else:
        client_id = (file_identity(cert_file), file_identity(key_file))
    if None in client_id:
        return None  # missing client file: stock cert_verify raises its OSError
    trust_id = trust_identity(cafile, capath)
    if trust_id is None:
        return None  # missing or unreadable CA source: stock raises its own error

    ssl_ = target.ssl_
    context_class = ssl_.SSLContext
    if not _shareable(context_class):
        return None
    return (  # Spec's fields, in order
        cert_reqs,
        expected_ca[0],
        expected_ca[1],
        cert_file,
        key_file,
        cafile,
        capath,
        trust_id,
        client_id,
        tuple(ssl_.ALPN_PROTOCOLS),
        expected_keylog(),
        context_class,
        target.connection.create_urllib3_context,
        target.urllib3_v2 and bool(ssl_.IS_PYOPENSSL or not ssl_.HAS_NEVER_CHECK_COMMON_NAME),
    )


_shareable_classes: dict[type, bool] = {}


def _shareable(context_class: type) -> bool:
    """Whether contexts of this class may be shared between threads at all.

    truststore's SSLContext reconfigures an inner context on every handshake; before 0.10.4
    it did so without a lock (truststore commit f3143e2), so sharing one is unsafe there.
    """
    known = _shareable_classes.get(context_class)
    if known is None:
        known = True
        if (getattr(context_class, "__module__", "") or "").split(".")[0] == "truststore":
            version = getattr(sys.modules.get("truststore"), "__version__", "0")
            known = _version(version) >= (0, 10, 4)
        _shareable_classes[context_class] = known
    return known


# --- wrapper 2: requests.adapters.HTTPAdapter.cert_verify ------------------------------------


class _StandIn:
    """Takes the TLS attributes cert_verify writes, so the real pool never carries them.

    Everything else is read from and written to the real pool.
    """

    __slots__ = ("_pool", *_VERIFY_ATTRS)

    def __init__(self, pool: Any) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "_pool", pool)
        setattr_(self, "cert_reqs", pool.cert_reqs)
        setattr_(self, "ca_certs", pool.ca_certs)
        setattr_(self, "ca_cert_dir", pool.ca_cert_dir)
        setattr_(self, "cert_file", pool.cert_file)
        setattr_(self, "key_file", pool.key_file)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _VERIFY_ATTRS:
            object.__setattr__(self, name, value)
        else:
            setattr(self._pool, name, value)

    def values(self) -> tuple[Any, ...]:
        return (self.cert_reqs, self.ca_certs, self.ca_cert_dir, self.cert_file, self.key_file)


def _bind_cert_verify(conn: Any, url: Any, verify: Any, cert: Any) -> tuple[Any, Any, Any, Any]:
    return conn, url, verify, cert


def cert_verify_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if not _install.STATE.active:
        return wrapped(*args, **kwargs)
    conn, url, verify, cert = _bind_cert_verify(*args, **kwargs)
    conn_kw = getattr(conn, "conn_kw", None)
    spec = spec_of(conn_kw.get("ssl_context")) if isinstance(conn_kw, dict) else None
    if spec is None:
        return wrapped(*args, **kwargs)  # not our pool: stock, byte for byte
    standin = _StandIn(conn)
    wrapped(standin, url, verify, cert)  # stock checks; stock errors propagate as they are
    try:
        hidden = _displaced_context(instance, conn)
        share = hidden is None and standin.values() == spec[:5] and _may_share(instance, conn)
    except Exception:
        _log.exception("requests_fastssl: internal error; this pool goes to stock requests")
        hidden, share = None, False
    if share:
        # Clear what would make urllib3 load into the shared context. Pools are created with
        # these set (the stock kwargs stay in the pool key), and every request passes here
        # before it can open a connection, so no connection ever sees them.
        if conn.ca_certs is not None:
            conn.ca_certs = None
        if conn.ca_cert_dir is not None:
            conn.ca_cert_dir = None
        if conn.cert_file is not None:
            conn.cert_file = None
        if conn.key_file is not None:
            conn.key_file = None
        if conn.cert_reqs != spec.cert_reqs:
            conn.cert_reqs = spec.cert_reqs
        return None
    # Detach: leave the pool exactly as stock cert_verify would. Attributes first, context
    # last: until the context is swapped, a connection racing us on this pool meets a
    # frozen context with CA paths and fails loudly, instead of connecting with a default
    # context and the wrong trust.
    for name, value in zip(_VERIFY_ATTRS, standin.values(), strict=False):
        setattr(conn, name, value)
    conn.conn_kw["ssl_context"] = hidden
    REGISTRY.count("detaches")
    return None


def _may_share(adapter: Any, pool: Any) -> bool:
    """Whether the pool, as it stands, gets from our context exactly what stock gives it."""
    target = _target
    if target is None:
        return False
    # Nothing may run after us that could rewrite the pool: no foreign wrapper above ours,
    # no subclass override of cert_verify (it may change conn.ca_certs after super()).
    if target.http_adapter.__dict__.get("cert_verify") is not _install.STATE.cert_verify_handle:
        return False
    adapter_class = type(adapter)
    if adapter_class is not target.http_adapter:
        for klass in adapter_class.__mro__:
            if "cert_verify" in klass.__dict__:
                if klass is not target.http_adapter:
                    return False
                break
    # The stock pool and connection classes: others may do anything with the context.
    if type(pool) not in target.pool_classes:
        return False
    if getattr(pool, "ConnectionCls", None) not in target.connection_classes:
        return False
    # Per-connection TLS inputs a shared context cannot embody (R3c, R6, key_password).
    if target.pool_tls_attrs(pool) != target.no_pool_tls_attrs:
        return False
    if pool.conn_kw.get("ca_cert_data") is not None:
        return False  # R3d: it would be loaded into the shared context
    # An HTTPS proxy's own TLS leg builds a context from the pool's CA paths (R11).
    proxy = getattr(pool, "proxy", None)
    return proxy is None or getattr(proxy, "scheme", None) == "http"


def _displaced_context(adapter: Any, pool: Any) -> Any | None:
    """The manager context our context displaced from this pool, if any (R3, R3b).

    Per-request pool kwargs override a manager's, and the context is the one TLS setting
    that leaves no trace on the pool when overridden. The wrapper of
    ``_urllib3_request_context`` only sees ``adapter.poolmanager``; a proxy manager (made
    after it ran) or a manager given a context later is checked here.
    """
    managers: list[Any] = [getattr(adapter, "poolmanager", None)]
    proxy_managers = getattr(adapter, "proxy_manager", None)
    if proxy_managers and isinstance(proxy_managers, dict):
        managers.extend(proxy_managers.values())
    for manager in managers:
        base = getattr(manager, "connection_pool_kw", None)
        ctx = base.get("ssl_context") if isinstance(base, dict) else None
        if ctx is not None and _manager_holds(manager, pool):
            return ctx
    return None


def _manager_holds(manager: Any, pool: Any) -> bool:
    pools = getattr(manager, "pools", None)
    container = getattr(pools, "_container", None)
    lock = getattr(pools, "lock", None)
    if container is None or lock is None:
        return True  # cannot tell: assume the worst, which detaches to the manager's context
    with lock:
        return any(held is pool for held in container.values())
