"""Building a shared context as urllib3 2.x's set-up would from the same inputs, and freezing it:
setters accept only the value it has (urllib3 repeats its writes on every connection), loaders
raise ``FrozenContextError``, so nothing reaching it through ``sock.context`` changes trust."""

from __future__ import annotations

import contextlib
import inspect
import ssl
import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from ._errors import FrozenContextError
from ._files import FileCheck, Unpinned, from_signal_handler, pinned, propagate
from ._genuine import GENUINE_CONTEXT
from ._green import context_classes
from ._policy import Aside, Reason, StockError

__all__ = ["FrozenContext", "build"]


def _refuse(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if name == "set_alpn_protocols" and args and list(args[0]) == self.__alpn__():
            return None  # urllib3 sets the same list on every connection
        raise FrozenContextError(
            f"{name}() on an SSLContext that requests_fastssl shares between connections"
        )

    method.__name__ = name
    return method


def _guarded(name: str, descriptor: Any) -> property:
    def get(self: Any) -> Any:
        return descriptor.__get__(self, type(self))

    def put(self: Any, value: Any) -> None:
        if get(self) != value:
            raise FrozenContextError(
                f"setting {name} on an SSLContext that requests_fastssl shares between "
                f"connections ({get(self)!r} -> {value!r})"
            )

    return property(get, put, doc=f"{name} (frozen: only its current value can be set)")


def _frozen_namespace(base: type) -> dict[str, Any]:
    """Every data descriptor of ``base`` (ssl.py's class or a green library's) guarded, every
    loader and setter method refused: derived from the class, so what a newer Python adds is
    covered."""
    namespace: dict[str, Any] = {"__slots__": ()}
    guarded = set()
    for name in dir(base):
        if name.startswith("__"):
            continue
        attr = inspect.getattr_static(base, name)
        if hasattr(attr, "__set__"):
            namespace[name] = _guarded(name, attr)
            guarded.add(name)
        elif name.startswith(("load_", "set_", "_set_", "_load_")) and callable(attr):
            namespace[name] = _refuse(name)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name in guarded:  # (urllib3 writes two of them on every new connection)
            object.__setattr__(self, name, value)  # the guarded property decides
            return
        raise FrozenContextError(f"setting {name} on an SSLContext that requests_fastssl shares")

    def __delattr__(self: Any, name: str) -> None:
        raise FrozenContextError(f"deleting {name} on an SSLContext that requests_fastssl shares")

    def __alpn__(self: Any) -> list[str]:
        return list(_ALPN.get(self, ()))

    namespace.update(__setattr__=__setattr__, __delattr__=__delattr__, __alpn__=__alpn__)
    namespace.update(__module__=__name__, __qualname__="FrozenContext")
    namespace["__doc__"] = "An SSLContext shared between connections: no setting changes."
    return namespace


FrozenContext: type[ssl.SSLContext] = type(
    "FrozenContext", (GENUINE_CONTEXT,), _frozen_namespace(GENUINE_CONTEXT)
)
# The frozen subclass of each green library's class (_genuine.GREEN) a context was built as.
_FROZEN: weakref.WeakKeyDictionary[type, type] = weakref.WeakKeyDictionary()
_FROZEN[GENUINE_CONTEXT] = FrozenContext


def _frozen_class(base: type) -> type:
    """The frozen subclass of ``base``: a context shared under gevent stays gevent's (its
    ``wrap_socket`` makes gevent's cooperative sockets, its setters do not recurse)."""
    frozen = _FROZEN.get(base)
    if frozen is None:
        frozen = type("FrozenContext", (base,), _frozen_namespace(base))
        frozen = _FROZEN.setdefault(base, frozen)
    return frozen


# The ALPN list each frozen context was built with (SSLContext cannot report it).
_ALPN: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _wrapped(wrap: Any, exc: OSError) -> StockError:
    """urllib3's conversion of a CA load's OSError, a signal handler's included (urllib3's
    ``except OSError`` wraps an alarm's TimeoutError landing in the load too). A handler's says
    nothing of the files: transient, not remembered as their failure."""
    error = wrap(exc)
    error.__cause__ = error.__context__ = exc  # (as `raise error from exc` leaves them)
    return StockError(error, transient=from_signal_handler(exc))


def _stock(step: Any, *args: Any, wrap: Any = None, **kwargs: Any) -> Any:
    """One of stock's own steps: what it raises is this connection's error, as stock raises it
    (``wrap``: urllib3's conversion of a load's OSError)."""
    try:
        return step(*args, **kwargs)
    except Exception as exc:
        if wrap is not None and isinstance(exc, OSError):
            raise _wrapped(wrap, exc) from None
        propagate(exc)
        raise StockError(exc) from None


@contextlib.contextmanager
def _pinned(checks: tuple[FileCheck, ...]) -> Iterator[list[str]]:
    """``pinned``'s names for a load. Its findings send this connection to stock and are not
    remembered (they are not the files' failure): no procfs, or a file changed under the load."""
    try:
        with pinned(checks) as names:
            yield names
    except Unpinned as exc:
        raise Aside(Reason.FILE_CHANGED if exc.procfs else Reason.NO_PROCFS) from None


def _through(pins: list[str], step: Any, *args: Any, wrap: Any = None) -> None:
    """Stock's load ``step(*args)`` of the files open at ``pins``: what their bytes make it raise
    is stock's error; an OSError of OpenSSL's open of a name (an errno, not an SSLError) is the
    build's failure, and stock loads the paths."""
    try:
        _stock(step, *args, wrap=wrap)
    except StockError as err:
        exc = err.error if wrap is None else err.error.__cause__
        unopened = isinstance(exc, OSError) and type(exc) is not ssl.SSLError
        if pins and unopened and not err.transient:
            raise OSError(f"not loaded through {pins}: {exc}") from None
        raise


def build(
    inputs: Mapping[str, Any],
    connection: types.ModuleType,
    ssl_: types.ModuleType,
    alpn: tuple[Any, ...],
    ca_check: FileCheck | None,
    checks: tuple[FileCheck, ...] = (),
) -> ssl.SSLContext:
    """A frozen context made as urllib3's set-up makes one for ``inputs``, in stock's order;
    an error of one of stock's steps is raised as ``StockError``, anything else of ours means
    stock for this connection. ``alpn`` is the list the key was made with."""
    version = _stock(connection.resolve_ssl_version, inputs["ssl_version"])
    cert_reqs = _stock(connection.resolve_cert_reqs, inputs["cert_reqs"])
    ctx: ssl.SSLContext = _stock(
        connection.create_urllib3_context,
        ssl_version=version,
        ssl_minimum_version=inputs["ssl_minimum_version"],
        ssl_maximum_version=inputs["ssl_maximum_version"],
        cert_reqs=cert_reqs,
    )
    if context_classes(type(ctx)) is not None:  # (ssl.py's, or a green library's known one)
        raise TypeError(f"urllib3 made a {type(ctx).__qualname__}, not a known SSLContext")
    if ctx.keylog_filename is not None:  # (SSLKEYLOGFILE set after the key was made)
        raise Aside(Reason.SETTINGS_CHANGED)
    _stock(setattr, ctx, "verify_mode", cert_reqs)
    assert_hostname, assert_fingerprint = inputs["assert_hostname"], inputs["assert_fingerprint"]
    if (
        assert_fingerprint
        or assert_hostname
        or assert_hostname is False
        or ssl_.IS_PYOPENSSL
        or not ssl_.HAS_NEVER_CHECK_COMMON_NAME
    ):
        _stock(setattr, ctx, "check_hostname", False)
    ca_certs, ca_dir, ca_data = inputs["ca_certs"], inputs["ca_cert_dir"], inputs["ca_cert_data"]
    if not ca_certs and not ca_dir and not ca_data:
        _stock(ctx.load_default_certs)
    elif ca_check is None:
        _stock(ctx.load_verify_locations, ca_certs, ca_dir, ca_data, wrap=ssl_.SSLError)
    else:  # (stock's call, the file named by its descriptor: docs/design.md, File checks)
        with _pinned((ca_check,)) as names:
            load = ctx.load_verify_locations
            _through(names, load, names[0], ca_dir, ca_data, wrap=ssl_.SSLError)
    key_file, cert_file, password = inputs["key_file"], inputs["cert_file"], inputs["key_password"]
    if key_file and password is None and _stock(ssl_._is_key_file_encrypted, key_file):
        raise StockError(ssl_.SSLError("Client private key is encrypted, password is required"))
    chain = checks[ca_check is not None :]  # (the client certificate's and key's)
    if password is None and any(b"ENCRYPTED" in check.contents for check in chain):
        # OpenSSL would ask for the passphrase (on the terminal), as stock does per connection.
        raise ssl.SSLError("an encrypted key without a password: left to stock")
    if cert_file:  # (through the files the checks read: docs/design.md, File checks)
        with _pinned(chain) as pins:
            names = pins or [cert_file, key_file]  # (none: warm()'s stock steps)
            given = (names[0], key_file and names[-1], *(() if password is None else (password,)))
            _through(pins, ctx.load_cert_chain, *given)
    _stock(ctx.set_alpn_protocols, list(alpn))
    # urllib3 reads this from a context it is given (and decides itself for one it made):
    # PyPy hard-codes True, which would accept a certificate naming the host only in its CN.
    if getattr(ctx, "hostname_checks_common_name", False) is not False:
        raise TypeError("hostname_checks_common_name cannot be turned off here")
    _ALPN[ctx] = tuple(alpn)
    ctx.__class__ = _frozen_class(type(ctx))
    return ctx
