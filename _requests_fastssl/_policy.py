"""Every rule for when the shim shares a context and when it steps aside, in one place:
``decide()`` takes one set-up's inputs as urllib3 passes them, with urllib3's settings, and gives
the registry key and the files to check, or the ``Reason`` for stock (docs/design.md's table)."""

from __future__ import annotations

import enum
import operator
import os
import ssl
import types
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from ._files import propagate
from ._genuine import KnownCode, genuine_unpatched, is_genuine_function
from ._green import context_classes

__all__ = ["INPUTS", "Aside", "Decision", "Reason", "Settings", "StockError", "decide"]


class Reason(enum.Enum):
    """Why a connection was left to stock: the code ``stats()`` counts, and why (doctor, log)."""

    # fmt: off
    OWN_CONTEXT = ("own-context", "the connection was given an SSLContext (an adapter's, a "
        "proxy's, botocore's, requests 2.32.0-2.32.4's): never shared; stock loads a CA file into "
        "it once per contents")
    CA_DIRECTORY = ("ca-directory", "verify names a CA directory: OpenSSL reads its entries "
        "lazily at each handshake, with the rights of that moment")
    DEFAULT_STORE = ("default-store", "verification with no CA file: the system store, whose "
        "directory OpenSSL reads lazily at each handshake")
    CONTEXT_CLASS = ("context-class", "urllib3's SSLContext is neither the standard library's "
        "nor gevent's or eventlet's, or not the one ssl.SSLContext names (pyOpenSSL, truststore, "
        "a green library patched after urllib3's import: stock recurses)")
    CONTEXT_PATCHED = ("context-patched", "a method or attribute of ssl.SSLContext was replaced "
        "(it would run once per build, not once per connection)")
    DEPRECATED_VERSION = ("deprecated-version", "a TLS version bound ssl deprecates: setting it "
        "warns, on every connection in stock")
    URLLIB3_REPLACED = ("urllib3-replaced", "create_urllib3_context or ssl_wrap_socket is not "
        "urllib3's own function (a wrapper or a replacement may do anything)")
    UNKNOWN_CODE = ("unknown-code", "urllib3's TLS code is not a variant the shim has reviewed "
        "(a local patch, a release newer than its table, a sourceless install): it gets the "
        "caller's inputs untouched")
    LAYER_BELOW = ("layer-below", "what the shim calls is not urllib3's own set-up but another "
        "layer (an APM's or a start-up hook's wrapper): it gets the caller's inputs untouched")
    SETTINGS_CHANGED = ("settings-changed", "a urllib3 setting or the environment changed while "
        "the context was built or used (ALPN switched by another thread): stock for this "
        "connection")
    SSL_VERSION = ("ssl-version", "ssl_version names one protocol version (deprecated): urllib3 "
        "warns on every connection")
    KEY_LOG = ("key-log", "SSLKEYLOGFILE is set: a context opens the file when it is made, and "
        "stock writes to whatever file has the name at each connection")
    KEY_PASSWORD_CALLABLE = ("key-password-callable", "key_password is a callable: OpenSSL asks "
        "it at every load and its answer may change")
    UNHASHABLE_SETTING = ("unhashable-setting", "an input or urllib3 setting cannot be keyed")
    NOT_A_FILE = ("not-a-file", "a CA or certificate file is missing, unreadable, over 8 MiB or "
        "not a regular file (a pipe is read once, by stock)")
    NO_PROCFS = ("no-procfs", "no procfs at /proc (a container without it, a /proc that is a "
        "plain directory, another system): a CA file or client certificate is loaded only "
        "through /proc/thread-self/fd, the descriptors its checks opened")
    BUILD_FAILED = ("build-failed", "the context could not be built (malformed file, wrong "
        "password): stock raises its own error")
    FILE_CHANGED = ("file-changed", "a file changed while its context was built")
    REENTRANT = ("reentrant", "this thread is already building that context (a signal handler or "
        "a hook made a request from inside the build; a greenlet of the builder's thread that "
        "cannot yield to a hub)")
    WAIT_TIMEOUT = ("wait-timeout", "another thread's build of the same context did not end "
        "within the bound")
    CALL_SHAPE = ("call-shape", "urllib3 called its set-up with arguments the shim does not know")
    URLLIB3_1 = ("urllib3-1.26", "urllib3 1.26 builds a context per connection object: the shim "
        "leaves it stock")
    INTERNAL_ERROR = ("internal-error", "a bug in the shim (logged with a traceback)")
    # fmt: on

    def __init__(self, code: str, text: str) -> None:
        self.code, self.text = code, text

    def __str__(self) -> str:
        return self.code


_BY_CODE = {reason.code: reason for reason in Reason}


class Aside(Exception):
    """A build's own finding: this connection goes to stock for ``reason``, nothing kept."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.code)
        self.reason = reason


class StockError(Exception):
    """Stock's own step raised ``error`` in a connection's build: that connection raises it.
    ``transient``: a signal handler raised it (an alarm during the CA load), which says nothing
    of the files: the failure is not remembered, and the next connection builds again."""

    def __init__(self, error: Exception, transient: bool = False) -> None:
        super().__init__(repr(error))
        self.error, self.transient = error, transient


# The keyword arguments of urllib3 2.x's _ssl_wrap_socket_and_match_hostname, every one of
# them an input of the context or of the checks after the handshake. A urllib3 whose
# function takes others is not patched (_install).
INPUTS = frozenset((
    "sock", "cert_reqs", "ssl_version", "ssl_minimum_version", "ssl_maximum_version",
    "cert_file", "key_file", "key_password", "ca_certs", "ca_cert_dir", "ca_cert_data",
    "assert_hostname", "assert_fingerprint", "server_hostname", "ssl_context", "tls_in_tls",
))  # fmt: skip


# Values that stand for themselves: by identity in a key; in a memo of one, their exact types and
# enum members (a subclass may hash by contents); in a tuple, whose items' types the memo does
# not hold, only None, str and bytes (no two of them equal: 0 == False == 0.0 are told apart).
_PLAIN = (type(None), bool, int, float, str, bytes, type, types.ModuleType, types.FunctionType,
          enum.Enum)  # fmt: skip
_EXACT, _INNER, _DICT = {*_PLAIN[:-1], enum.EnumType}, {type(None), str, bytes}, object()


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in for a setting's value (lists and dicts by contents; the common
    values, which stand for themselves, tested first)."""
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if isinstance(value, list | tuple):
        return (type(value).__name__, *map(_frozen, value))
    if isinstance(value, Mapping):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    hash(value)  # TypeError: unhashable, the caller steps aside
    return (type(value), value)  # (typed: 0 == False, 771.0 == TLSv1_2; urllib3 tells apart)


def _fixed(value: Any, kinds: set[Any] = _EXACT) -> bool:  # (_frozen: it, by identity)
    if type(value) is tuple:
        return all(_fixed(item, _INNER) for item in value)
    return type(value) in kinds or (kinds is _EXACT and issubclass(type(value), enum.Enum))


class _Secret(tuple):  # type: ignore[type-arg]
    """A key password in a registry key: compared and hashed, never shown in a repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<key password>"


class Settings:
    """urllib3's settings feeding its context (the factory and the names it reads, the context
    class, flags, ALPN, key log), read at each set-up."""

    def __init__(self, connection: types.ModuleType, ssl_: types.ModuleType) -> None:
        self.connection, self.ssl_ = connection, ssl_
        self.urllib3_1 = not hasattr(connection, "_ssl_wrap_socket_and_match_hostname")
        factory = ssl_.create_urllib3_context
        # (a factory that is not a function, a functools.partial: never urllib3's own, so
        # every connection goes to stock, urllib3-replaced; nothing to read here)
        code, space = getattr(factory, "__code__", None), getattr(factory, "__globals__", {})
        names = getattr(code, "co_names", ())
        self.globals = tuple(name for name in names if name in space)
        self._memo: tuple[Any, ...] = ()  # (the last probe all fixed: snapshot)
        self.code = KnownCode(connection, ssl_)

    def known(self, set_up: Any = None) -> Reason | None:
        """None if the set-up (``set_up``: the function the wrapper was given) and every tabled
        function it reaches are urllib3's own and tabled, else the Reason for stock."""
        found = self.code.check(set_up)
        return None if found is None else _BY_CODE[found]

    def snapshot(self) -> Reason | tuple[tuple[Hashable, ...], tuple[Any, ...]]:
        """The settings' part of the key and its ALPN list: one reading, the build's too."""
        connection, ssl_ = self.connection, self.ssl_
        factory = connection.create_urllib3_context
        unknown = self.known()
        if unknown is not None:
            return unknown
        cls = ssl_.SSLContext  # (ssl.py's, or a green library's: _genuine.GREEN)
        if ssl_.IS_PYOPENSSL:
            return Reason.CONTEXT_CLASS
        classes = context_classes(cls)
        if classes is not None:
            return _BY_CODE[classes]
        if not genuine_unpatched():
            return Reason.CONTEXT_PATCHED
        if "SSLKEYLOGFILE" in os.environ:  # (as stock asks: a patched os.environ answers alike)
            return Reason.KEY_LOG
        space = factory.__globals__
        try:
            alpn = tuple(ssl_.ALPN_PROTOCOLS)  # (one copy: a list changed in place stays apart)
            read = [cls, factory, connection.resolve_cert_reqs, connection.resolve_ssl_version,
                    ssl_.HAS_NEVER_CHECK_COMMON_NAME, factory.__defaults__,
                    factory.__kwdefaults__, *map(space.get, self.globals)]  # fmt: skip
            read = [v.copy() if type(v) is dict else v for v in read]  # (one reading, in C)
            # All that freezing them reads, with its types: where all of it stands for itself,
            # it is the key (one reading; freezing it all, cold, took 30 of a set-up's 130 us).
            held = [x for d in read if type(d) is dict for x in (len(d), *d, *d.values())]
            probe = [*(_DICT if type(v) is dict else v for v in read), len(alpn), *alpn, *held]
            probe += [*map(type, probe)]
            memo = self._memo
            if len(probe) == len(memo) and all(map(operator.is_, probe, memo)):
                return memo, alpn  # (the same objects as the last reading: its very tuple)
            if all(_fixed(value) for value in probe if value is not _DICT):
                self._memo = memo = tuple(probe)
                return memo, alpn
            return (*map(_frozen, read), _frozen(alpn)), alpn
        except (TypeError, ValueError) as exc:  # (ValueError: a writable memoryview)
            propagate(exc)
            return Reason.UNHASHABLE_SETTING


_DEPRECATED = {getattr(ssl.TLSVersion, n, None) for n in ("SSLv3", "TLSv1", "TLSv1_1")} - {None}


def _deprecated(version: Any) -> bool:
    try:
        return version in _DEPRECATED
    except TypeError as exc:
        return propagate(exc)  # (unhashable: the key steps aside for it)


def _no_version(version: Any, settings: Settings) -> bool | Reason:
    """Whether urllib3's factory treats this ssl_version as none at all (PROTOCOL_TLS or _CLIENT:
    requests-toolbelt's SSLAdapter passes one), by its own test on the resolved value, with its
    module's names: then the context is the one for None, and nothing warns. A factory not
    urllib3's own decides what the version means: ``URLLIB3_REPLACED``."""
    try:
        factory = settings.ssl_.create_urllib3_context
        if not is_genuine_function(factory, settings.ssl_):
            return Reason.URLLIB3_REPLACED
        space = factory.__globals__
        resolved = settings.connection.resolve_ssl_version(version)
        return bool(resolved in (None, space["PROTOCOL_TLS"], space["PROTOCOL_TLS_CLIENT"]))
    except Exception as exc:  # (stock raises it at its own step: stock does that work)
        return propagate(exc)


class Decision(NamedTuple):
    """One set-up's registry key, files to check, and the ALPN list read with the key."""

    key: tuple[Hashable, ...]
    paths: tuple[str, ...]
    alpn: tuple[Any, ...]


def decide(inputs: Mapping[str, Any], settings: Settings) -> Reason | Decision:
    """The registry key and the files to check for one connection set-up, or why stock."""
    if settings.urllib3_1:
        return Reason.URLLIB3_1
    if inputs.get("ssl_context") is not None:
        return Reason.OWN_CONTEXT
    if inputs.get("ssl_version") is not None:
        none = _no_version(inputs["ssl_version"], settings)
        if none is not True:
            return none or Reason.SSL_VERSION
    ca_certs, ca_dir, ca_data = inputs["ca_certs"], inputs["ca_cert_dir"], inputs["ca_cert_data"]
    if ca_dir:
        return Reason.CA_DIRECTORY
    if _deprecated(inputs["ssl_minimum_version"]) or _deprecated(inputs["ssl_maximum_version"]):
        return Reason.DEPRECATED_VERSION
    cert_file, key_file, password = inputs["cert_file"], inputs["key_file"], inputs["key_password"]
    if callable(password):
        return Reason.KEY_PASSWORD_CALLABLE
    try:  # (the key and the checks from one reading of a path object: it may name another)
        ca_certs, cert_file, key_file = (
            (n and os.fspath(n)) or n for n in (ca_certs, cert_file, key_file)
        )
    except TypeError as exc:  # (an int is a descriptor: stock's loads refuse it)
        return propagate(exc) or Reason.NOT_A_FILE
    taken = settings.snapshot()
    if isinstance(taken, Reason):
        return taken
    snapshot, alpn = taken
    files = [ca_certs] if ca_certs else []
    if not (ca_certs or ca_dir or ca_data):
        # Stock loads the system store (load_default_certs). Its directory is read lazily,
        # at each handshake: that can only be left out of account where verification is
        # off (the store then decides nothing), so only then is the store shared.
        try:
            unverified = settings.connection.resolve_cert_reqs(inputs["cert_reqs"]) == 0
        except Exception as exc:
            unverified = propagate(exc)
        if not unverified or cert_file:
            return Reason.DEFAULT_STORE
        # No file to check: unverified, with no certificate to send, the store decides nothing
        # and its load cannot fail (docs/design.md). Which files it names is in the key.
        snapshot = (*snapshot, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    files += [name for name in (cert_file, key_file) if name]
    try:
        plain = (inputs["cert_reqs"], inputs["ssl_minimum_version"],
                 inputs["ssl_maximum_version"], ca_certs, ca_data, cert_file, key_file,
                 inputs["assert_hostname"], inputs["assert_fingerprint"])  # fmt: skip
        key = (*map(_frozen, plain), _Secret((_frozen(password),)), snapshot)
        hash(key)
    except (TypeError, ValueError) as exc:
        propagate(exc)
        return Reason.UNHASHABLE_SETTING
    return Decision(key, tuple(files), alpn)
