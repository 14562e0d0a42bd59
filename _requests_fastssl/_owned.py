"""Contexts an adapter owns: their CA bundle loaded once per file identity, not per connection.

An adapter that hands urllib3 its own ``ssl_context`` (requests' documented pattern for
client certificates in memory, toolbelt's ``X509Adapter``, httpie's adapter) gets no shared
context: the context is the user's, and the shim neither freezes nor replaces it. But with
``verify`` on, stock urllib3 loads the CA bundle into that same context again for every new
connection, tens of milliseconds each time, and every load after the first adds nothing:
OpenSSL's certificate store ignores certificates it already holds.

So for such a context, once a connection has loaded a bundle file into it, the next
connections skip loading that file while it is unchanged (the same identity as
``_keys.FileCheck`` checks for shared contexts: a rewritten or replaced bundle is loaded
again, on top of the old contents, exactly as stock would). Everything else urllib3 does
on the context, every connection, stays as it is.

The hook is ``urllib3.connection.ssl_wrap_socket``, the one place both urllib3 1.26 and 2.x
load a given context's CA file; it acts only for contexts the ``cert_verify`` wrapper
adopted from a requests pool, so other urllib3 users are not touched. (It is also where an
HTTPS proxy's own leg gets its shared context: ``_proxyleg``.)
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ._keys import FileCheck
from ._proxyleg import take
from ._registry import REGISTRY
from ._state import STATE

__all__ = ["adopt", "ssl_wrap_socket_wrapper"]

# context -> {CA file as urllib3 passes it: the identity of what was loaded}
_loaded: weakref.WeakKeyDictionary[Any, dict[str, FileCheck]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def adopt(ctx: Any, cafile: str | None, capath: str | None) -> bool:
    """Remember ``ctx`` (a pool's own context) if a repeated load of ``cafile`` into it can
    be skipped: plain ``ssl.SSLContext`` loading (a subclass or an instance attribute that
    replaces ``load_verify_locations`` might do more than load, so stock calls it every
    time), a CA file and no CA directory (directories are read lazily: nothing to save)."""
    # The C method itself (not ssl.SSLContext's attribute, which a tracer or a test double
    # may have replaced). Imported here: on a Python without ssl the shim must still load.
    from _ssl import _SSLContext

    if not cafile or capath is not None:
        return False
    if getattr(type(ctx), "load_verify_locations", None) is not _SSLContext.load_verify_locations:
        return False
    try:
        if "load_verify_locations" in vars(ctx):
            return False
        with _lock:
            _loaded.setdefault(ctx, {})
    except TypeError:  # neither a __dict__ nor weak references: leave it stock
        return False
    return True


def ssl_wrap_socket_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    ctx = kwargs.get("ssl_context")
    if ctx is None or not STATE.active:
        return wrapped(*args, **kwargs)
    shared = take(ctx)  # an HTTPS proxy's own leg (_proxyleg)
    if shared is not None:
        return wrapped(*args, **{**kwargs, "ssl_context": shared})
    try:
        files = _loaded.get(ctx)
    except TypeError:
        files = None
    cafile = kwargs.get("ca_certs")
    if (
        files is None
        or not isinstance(cafile, str)
        or kwargs.get("ca_cert_dir") is not None
        or kwargs.get("ca_cert_data") is not None
    ):
        return wrapped(*args, **kwargs)
    check = files.get(cafile)
    if check is not None and check.unchanged():
        # These exact contents are in the context's store already; loading them again
        # would add nothing. The rest of the set-up (client certificate, ALPN, the
        # handshake) runs as stock.
        REGISTRY.count("owned_loads_avoided")
        return wrapped(*args, **{**kwargs, "ca_certs": None})
    check = FileCheck(cafile, is_dir=False)
    # The bytes just read must still be the file's when the load starts: loading them then
    # is loading the file then, as stock's load would (a snapshot is not read again).
    if not check.usable() or not check.unchanged():
        return wrapped(*args, **kwargs)  # a pipe, a file being written: stock's own load
    try:
        with check.snapshot() as path:
            ctx.load_verify_locations(path)
    except Exception:
        # Stock's own load then raises its own error (adding again what ours added, which
        # OpenSSL ignores, as it ignores certificates it holds).
        return wrapped(*args, **kwargs)
    if path == cafile and not check.unchanged():
        # (No snapshot here: the file itself was loaded, and changed meanwhile.) Not
        # remembered; stock's own load of what is there now goes on top.
        return wrapped(*args, **kwargs)
    with _lock:
        files[cafile] = check
    return wrapped(*args, **{**kwargs, "ca_certs": None})


def forget_all() -> None:
    """uninstall(): every adopted context goes back to loading on every connection."""
    with _lock:
        _loaded.clear()
