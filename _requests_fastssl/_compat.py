"""Which requests/urllib3 we can patch, and the facts about them read once at patch time.

The most important fact is *what a context depends on*. Rather than a hand-kept list of
urllib3 settings (which a new urllib3 release could silently make stale), ``Target`` reads
the code urllib3 runs to set up a TLS connection (``HTTPSConnection.connect`` and every
urllib3 function it reaches) and collects every module-level name that code reads: ciphers,
ALPN, options, version flags, the context class, the factory, ``ssl_`` flags read through
the module, the environment variables it looks up. ``settings()`` snapshots all of them; the
snapshot is part of every registry key and is checked again on every new connection, so a
program that changes any of them after its first request gets what stock urllib3 gives it.
"""

from __future__ import annotations

import dis
import operator
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, cast

__all__ = [
    "MIN_REQUESTS",
    "PoolTLS",
    "Secret",
    "Settings",
    "Target",
    "Underivable",
    "unsupported_reason",
    "version_tuple",
]

MIN_REQUESTS = (2, 32, 3)
_ARGNAMES_VERIFY = ("self", "conn", "url", "verify", "cert")
# How urllib3 calls its context factory for a pool without a context of its own; checked
# against urllib3's code at patch time (the keyword names are constants of the caller).
_FACTORY_CALLS = (
    ("ssl_version", "ssl_minimum_version", "ssl_maximum_version", "cert_reqs"),  # 2.x
    ("ssl_version", "cert_reqs"),  # 1.26
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{2,}\Z")
_ENVIRON_DATA: Any = getattr(os.environ, "_data", None)


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _argnames(func: Any) -> tuple[str, ...]:
    import wrapt

    code = getattr(wrapt.unwrapped(func) if func is not None else None, "__code__", None)
    if code is None:
        return ()
    names: tuple[str, ...] = code.co_varnames[: code.co_argcount]
    return names


def unsupported_reason(adapters: types.ModuleType) -> str | None:
    """Why the imported requests cannot be patched safely, or None if it can."""
    requests_version = getattr(sys.modules.get("requests.__version__"), "__version__", "")
    if not requests_version or version_tuple(requests_version) < MIN_REQUESTS:
        return f"requests {requests_version or '(unknown version)'} is older than 2.32.3"
    if version_tuple(requests_version)[0] >= 3:
        return f"requests {requests_version} is newer than the 2.x line this shim knows"
    import urllib3

    urllib3_version = getattr(urllib3, "__version__", "")
    if version_tuple(urllib3_version) < (1, 26) or version_tuple(urllib3_version)[0] >= 3:
        return f"urllib3 {urllib3_version} is outside 1.26.x-2.x"
    try:  # (urllib3 1.26 defines a stand-in SSLContext class when ssl is missing)
        import ssl  # noqa: F401
    except ImportError:
        return "this Python has no ssl module"
    try:
        import wrapt
    except ImportError:
        return "wrapt is not installed"
    if not hasattr(wrapt, "unwrap_object"):
        return f"wrapt {getattr(wrapt, '__version__', '?')} is older than 2.4"
    adapter = getattr(adapters, "HTTPAdapter", None)
    if _argnames(getattr(adapter, "cert_verify", None)) != _ARGNAMES_VERIFY:
        return "requests.adapters.HTTPAdapter.cert_verify is missing or has a new signature"
    return None


class Underivable(Exception):
    """urllib3's connection set-up does something this shim cannot account for."""


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _reads(roots: list[Any]) -> tuple[dict[str, tuple[Any, list[str]]], set[str]]:
    """Every module-level name the code of ``roots`` (and the urllib3 functions it calls)
    reads: {module name: (module dict, [names])}, and the environment variables it reads."""
    reads: dict[str, tuple[Any, list[str]]] = {}
    env: set[str] = set()
    seen: set[Any] = set()

    def note(namespace: dict[str, Any], name: str) -> None:
        entry = reads.setdefault(namespace["__name__"], (namespace, []))
        if name not in entry[1]:
            entry[1].append(name)

    def walk(func: Any) -> None:
        func = getattr(func, "__func__", func)
        if func in seen or not isinstance(func, types.FunctionType):
            return
        seen.add(func)
        namespace = func.__globals__
        for code in _code_objects(func.__code__):
            if "environ" in code.co_names or "getenv" in code.co_names:
                env.update(c for c in code.co_consts if isinstance(c, str) and _ENV_NAME.match(c))
            owner: Any = None
            for ins in dis.get_instructions(code):
                if ins.opname == "LOAD_GLOBAL" and ins.argval in namespace:
                    value = namespace[ins.argval]
                    owner = value if isinstance(value, types.ModuleType) else None
                    # Through wrapt layers (ours on ssl_wrap_socket, anyone's) to the code.
                    code_of = value
                    for _ in range(8):  # (bounded: a proxy may wrap itself)
                        if isinstance(code_of, type | types.FunctionType | types.ModuleType):
                            break
                        code_of = getattr(code_of, "__wrapped__", code_of)
                    if (
                        isinstance(code_of, types.FunctionType)
                        and (code_of.__module__ or "").split(".")[0] == "urllib3"
                    ):
                        walk(code_of)
                    note(namespace, ins.argval)
                elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and owner is not None:
                    # module.attribute (ssl_.IS_PYOPENSSL, ssl.CERT_NONE, ...)
                    # (os.environ itself is not a setting: the variables read are.)
                    value = getattr(owner, ins.argval, os.environ)
                    if value is not os.environ and not isinstance(value, types.ModuleType):
                        note(vars(owner), ins.argval)
                    owner = None
                else:
                    owner = None

    for root in roots:
        walk(root)
    return reads, env


def _adds_only(cls: Any, base: type, allowed: set[str]) -> bool:
    """Whether ``cls`` subclasses ``base`` and the classes between them define nothing that
    behaves but ``allowed`` names, a constructor and the pool's connection class. Data the
    interpreter puts in every class body (``__doc__``, ``__module__``, 3.13's
    ``__static_attributes__`` and ``__firstlineno__``, ...) is not behaviour."""
    if not isinstance(cls, type) or not issubclass(cls, base):
        return False
    mro = cls.__mro__
    for klass in mro[: mro.index(base)]:
        for name, value in vars(klass).items():
            if name in allowed or name in ("ConnectionCls", "__init__"):
                continue
            dunder = name.startswith("__") and name.endswith("__")
            data = isinstance(value, str | int | tuple | dict | types.GetSetDescriptorType) or (
                value is None
            )
            if not (dunder and data):
                return False
    return True


class Secret:
    """A client key's password: compared and hashed as its value, never shown."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.value == other.value

    def __repr__(self) -> str:
        return "Secret(<hidden>)"


class PoolTLS(NamedTuple):
    """The TLS settings a pool passes to each new connection (None: not set)."""

    key_password: Secret | None = None
    ssl_version: Any = None
    ssl_minimum_version: Any = None
    ssl_maximum_version: Any = None
    assert_hostname: Any = None
    assert_fingerprint: Any = None


NO_POOL_TLS = PoolTLS()


class Settings:
    """A snapshot of urllib3's settings, hashed once: it is part of every registry key, and
    hashing some fifty values on every request would cost more than the rest of the key."""

    __slots__ = ("_hash", "values")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        self._hash = hash(values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Settings) and self.values == other.values)

    def __repr__(self) -> str:
        return f"Settings(<{len(self.values)} values>)"


def _snapshotter(
    reads: dict[str, tuple[dict[str, Any], list[str]]],
) -> tuple[tuple[str, ...], Callable[[], tuple[Any, ...]]]:
    """One function that reads every setting into a tuple: a few microseconds per request
    for some seventy names, where a loop over getters took ten."""
    names: list[str] = []
    items: list[str] = []
    namespaces: dict[str, Any] = {}
    for index, (module_name, (namespace, read)) in enumerate(sorted(reads.items())):
        namespaces[f"n{index}"] = namespace
        for name in read:
            value = namespace[name]
            if isinstance(value, types.ModuleType):
                continue  # what is read from a module is collected on its own
            names.append(f"{module_name}.{name}")
            item = f"n{index}[{name!r}]"
            # Mutable settings are copied, so a change made in place is seen too.
            if isinstance(value, list):
                item = f"tuple({item})"
            elif isinstance(value, dict):
                item = f"tuple({item}.items())"
            elif isinstance(value, set):
                item = f"frozenset({item})"
            items.append(item)
    source = f"def snapshot({', '.join(f'{n}={n}' for n in namespaces)}):\n"
    source += f"    return ({', '.join(items)},)\n"
    scope: dict[str, Any] = dict(namespaces)
    exec(compile(source, "<requests_fastssl settings>", "exec"), scope)
    return tuple(names), scope["snapshot"]


class Target:
    """Facts about the patched requests and urllib3, read once when patching."""

    def __init__(self, adapters: types.ModuleType) -> None:
        import urllib3
        import urllib3.connection
        import urllib3.connectionpool
        import wrapt
        from urllib3.util import ssl_

        self.adapters = adapters
        self.http_adapter: type = adapters.HTTPAdapter
        self.ssl_ = ssl_
        self.connection = urllib3.connection
        self.urllib3_v2 = getattr(urllib3, "__version__", "").split(".")[0] == "2"
        self.pool_classes: set[Any] = {urllib3.connectionpool.HTTPSConnectionPool}
        self.connection_classes: set[Any] = {urllib3.connection.HTTPSConnection}
        # SOCKS (requests[socks]): classes that change how the socket is made and nothing
        # of TLS, checked on the classes themselves. requests imported the module already
        # if PySocks is installed.
        socks = sys.modules.get("urllib3.contrib.socks")
        socks_pool = getattr(socks, "SOCKSHTTPSConnectionPool", None)
        socks_connection = getattr(socks, "SOCKSHTTPSConnection", None)
        if (
            _adds_only(socks_connection, urllib3.connection.HTTPSConnection, {"_new_conn"})
            and _adds_only(socks_pool, urllib3.connectionpool.HTTPSConnectionPool, set())
            and getattr(socks_pool, "ConnectionCls", None) is socks_connection
        ):
            self.pool_classes.add(socks_pool)
            self.connection_classes.add(socks_connection)
        codenames = wrapt.unwrapped(adapters.HTTPAdapter.cert_verify).__code__.co_names
        # requests 2.32.3 and 2.32.4 give verify=True pools the context they built at import
        # (the cache requests later reverted): such pools hold a context of their own, so
        # the wrapper leaves them alone.
        self.shares_default = "DEFAULT_CA_BUNDLE_PATH" in codenames

        # How urllib3 sets up a connection for a pool that has no context: the caller of
        # the factory and the keyword arguments it passes.
        https = urllib3.connection.HTTPSConnection
        roots: list[Any] = [https.connect]
        setup = getattr(urllib3.connection, "_ssl_wrap_socket_and_match_hostname", None)
        if setup is not None:
            roots.append(setup)
        consts = {c for root in roots for co in _code_objects(root.__code__) for c in co.co_consts}
        calls = [call for call in _FACTORY_CALLS if call in consts]
        if not calls:
            raise Underivable(
                "urllib3 calls its SSLContext factory in a way this shim does not know"
            )
        self.factory_kwargs = calls[0]
        self.call_factory = _factory_caller(roots)
        # urllib3's own factory, by its code. Another callable in its place (a wrapper, a
        # partial, a replacement) may depend on anything: its own state, the time, the
        # caller's frame. No key covers that, so such pools step aside.
        own = getattr(ssl_, "create_urllib3_context", None)
        self._factory_code = (
            own.__code__
            if type(own) is types.FunctionType
            and own.__code__.co_filename == getattr(ssl_, "__file__", None)
            else None
        )

        # The proxy's own TLS leg can be shared where urllib3 sets it up as _proxyleg
        # expects: 2.x's _connect_tls_proxy, through the same set-up function.
        proxy_leg = getattr(https, "_connect_tls_proxy", None)
        self.proxy_leg = (
            self.urllib3_v2
            and setup is not None
            and proxy_leg is not None
            and setup.__name__ in wrapt.unwrapped(proxy_leg).__code__.co_names
        )

        # (2.x sets up every TLS connection in one function; 1.26 does it in connect().)
        reads, env = _reads([setup] if setup is not None else roots)
        self.setting_names, self._snapshot = _snapshotter(reads)
        self._last: Settings | None = None
        self.env_names = tuple(sorted(env))
        self._env_keys = tuple(
            os.environ.encodekey(n) if _ENVIRON_DATA is not None else n for n in self.env_names
        )

        # The pool's own TLS settings, which urllib3 passes to every new connection (1.26
        # pools have no ssl_minimum_version / ssl_maximum_version): part of the key.
        probe = urllib3.connectionpool.HTTPSConnectionPool("localhost")
        self.pool_tls_names = tuple(name for name in _POOL_TLS_ATTRS if hasattr(probe, name))
        self._pool_tls = operator.attrgetter(*self.pool_tls_names)
        self._no_pool_tls = (None,) * len(self.pool_tls_names)

    def pool_tls(self, pool: Any) -> PoolTLS:
        """The pool's TLS settings (its key password kept out of any repr)."""
        raw = self._pool_tls(pool)
        if raw == self._no_pool_tls:
            return NO_POOL_TLS  # the common case, without building anything
        values = dict(zip(self.pool_tls_names, raw, strict=True))
        password = values.pop("key_password", None)
        return PoolTLS(
            key_password=None if password is None else Secret(password),
            ssl_version=values.get("ssl_version"),
            ssl_minimum_version=values.get("ssl_minimum_version"),
            ssl_maximum_version=values.get("ssl_maximum_version"),
            assert_hostname=values.get("assert_hostname"),
            assert_fingerprint=values.get("assert_fingerprint"),
        )

    def settings(self) -> Settings:
        """Every module-level input of urllib3's connection set-up, as it stands now.

        Raises KeyError for a setting deleted, or TypeError for one replaced by something
        unhashable: the caller then steps aside."""
        values = self._values()
        last = self._last
        if last is not None and last.values == values:  # (identical items: a quick compare)
            return last
        self._last = Settings(values)
        return self._last

    def _values(self) -> tuple[Any, ...]:
        snapshot = self._snapshot()
        if self._env_keys:
            env: list[Any] = []
            for name in self._env_keys:
                # os.environ.get raises and catches a KeyError for an unset variable (the
                # common case, a microsecond each); its backing dict answers directly.
                if _ENVIRON_DATA is not None and name not in _ENVIRON_DATA:
                    env.append(None)
                else:
                    raw = os.environ.get(os.fsdecode(name) if isinstance(name, bytes) else name)
                    env.append((raw, _points_at(raw)))
            snapshot += tuple(env)
        return snapshot

    def factory_replaced(self) -> bool:
        """Whether urllib3's connection set-up would call a factory other than urllib3's."""
        factory = getattr(self.connection, "create_urllib3_context", None)
        return type(factory) is not types.FunctionType or factory.__code__ is not (
            self._factory_code
        )

    def context_class(self) -> type:
        """The class urllib3's factory instantiates right now."""
        cls: Any = self.ssl_.SSLContext
        return cast(type, cls)


def _factory_caller(roots: list[Any]) -> Callable[..., Any]:
    """A function that calls urllib3's context factory as if from urllib3's own call site:
    in urllib3.connection's namespace (the name looked up when called, as urllib3 does), on
    its file and line. The factory warns with stacklevel=2 (the deprecated ``ssl_version``),
    so warnings filters by module, "once per location" and -W error then act on a build's
    warning exactly as on stock's. Falls back to a plain call if the site is not found."""
    for root in roots:
        module = sys.modules.get(root.__module__)
        for code in _code_objects(root.__code__):
            for ins in dis.get_instructions(code):
                line = ins.positions.lineno if ins.positions else None
                if ins.argval == "create_urllib3_context" and module is not None and line:
                    source = (
                        "\n" * (line - 1) + "def call(kw): return create_urllib3_context(**kw)\n"
                    )
                    scope: dict[str, Any] = {}
                    # Executed with the module's own globals, defining into `scope` only.
                    exec(compile(source, code.co_filename, "exec"), vars(module), scope)
                    call = scope["call"]
                    return lambda **kwargs: call(kwargs)
    connection = sys.modules["urllib3.connection"]
    return lambda **kwargs: connection.create_urllib3_context(**kwargs)


def _points_at(raw: str | None) -> tuple[int, int] | None:
    """What an environment path (SSLKEYLOGFILE) names: a file replaced under the same name
    gets a new key, as a fresh context would open the new file."""
    if not raw:
        return None
    try:
        st = os.stat(os.path.expandvars(raw))
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


_POOL_TLS_ATTRS = (
    "key_password",
    "ssl_version",
    "ssl_minimum_version",
    "ssl_maximum_version",
    "assert_hostname",
    "assert_fingerprint",
)
