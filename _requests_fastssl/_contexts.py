"""Building one shared context exactly as urllib3 would for a pool, and freezing it.

urllib3, given a context, repeats on it for every new connection what it would otherwise do
to a fresh one: write ``verify_mode``, maybe ``check_hostname``, load the CA source and the
client certificate, set ALPN (``urllib3.util.ssl_.ssl_wrap_socket``). ``build`` does all of
that once, in the same order, with the same factory and class urllib3 would use, then
publishes the context by switching its class to a frozen subclass. From then on a write of
the value a context already holds is a no-op that never reaches OpenSSL (urllib3 writes
``verify_mode`` and ALPN on every connection), and every other change raises
``FrozenContextError``: a shared context that changed would change trust or identity for
every pool holding it (requests 2.32.x, regressions R1, R2, R5, R6).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._errors import FrozenContextError
from ._keys import Spec, trust_identity

if TYPE_CHECKING:
    from ._registry import Registry

__all__ = ["build", "spec_of"]

# SSLContext methods that change a context. A frozen context refuses all of them, but for
# set_alpn_protocols with the list it already has.
_MUTATORS = (
    "load_verify_locations",
    "load_cert_chain",
    "load_default_certs",
    "set_default_verify_paths",
    "set_ciphers",
    "set_ecdh_curve",
    "load_dh_params",
    "set_servername_callback",
    "set_npn_protocols",
    "set_psk_client_callback",
    "set_psk_server_callback",
)
_SPEC_ATTR = "_requests_fastssl_spec"
_SET_CLASS = object.__dict__["__class__"].__set__
_frozen_classes: dict[type, type] = {}


class _NeedsPassword(Exception):
    """The client key is encrypted: stock urllib3 raises or prompts, so we step aside."""


def _no_password() -> str:
    # Passed to load_cert_chain so OpenSSL never prompts on a terminal while we build.
    raise _NeedsPassword


def _refusal(what: str) -> FrozenContextError:
    return FrozenContextError(
        f"requests_fastssl shares this SSLContext between connection pools, so it cannot "
        f"{what}. To use a context of your own, give it to your adapter "
        f"(HTTPAdapter.init_poolmanager(..., ssl_context=ctx)); the shim leaves such "
        f"adapters to stock requests. Or call requests_fastssl.uninstall()."
    )


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    try:
        unchanged = getattr(self, name) == value
    except Exception:
        unchanged = False
    if unchanged is True:
        return  # same value: nothing to do, and OpenSSL is not touched
    raise _refusal(f"set {name}={value!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise _refusal(f"delete {name}")


def _frozen_set_alpn_protocols(self: Any, alpn_protocols: Any) -> None:
    if list(alpn_protocols) == list(getattr(self, _SPEC_ATTR).alpn):
        return
    raise _refusal(f"set ALPN protocols to {list(alpn_protocols)!r}")


def _make_refuser(name: str) -> Any:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise _refusal(f"call {name}()")

    refuse.__name__ = name
    return refuse


def _counting(method: Any) -> Any:
    """Count connections made with shared contexts (each one is a load stock would do)."""
    from ._registry import REGISTRY

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        REGISTRY.count("connections")
        return method(self, *args, **kwargs)

    wrapper.__name__ = method.__name__
    return wrapper


def _frozen_class(base: type) -> type:
    """The frozen subclass of ``base`` (one per base: truststore may swap the class)."""
    frozen = _frozen_classes.get(base)
    if frozen is None:
        namespace: dict[str, Any] = {
            "__slots__": (),
            "__module__": "requests_fastssl",
            "__setattr__": _frozen_setattr,
            "__delattr__": _frozen_delattr,
            "set_alpn_protocols": _frozen_set_alpn_protocols,
            "_requests_fastssl_shared": True,
        }
        for name in _MUTATORS:
            if hasattr(base, name):
                namespace[name] = _make_refuser(name)
        for name in ("wrap_socket", "wrap_bio"):  # one call per new TLS connection
            if hasattr(base, name):
                namespace[name] = _counting(getattr(base, name))
        frozen = type(f"Shared{base.__name__}", (base,), namespace)
        # setdefault: two threads building their first context of a new base agree on one.
        frozen = _frozen_classes.setdefault(base, frozen)
    return frozen


def spec_of(ctx: object) -> Spec | None:
    """The spec a shared context was built for; None for any other object."""
    if getattr(type(ctx), "_requests_fastssl_shared", False):
        spec: Spec = ctx.__dict__[_SPEC_ATTR]
        return spec
    return None


def build(spec: Spec, registry: Registry) -> Any | None:
    """Build, load and freeze the context for ``spec``; None if stock should handle it.

    Every failure (missing or unreadable file, bad PEM, encrypted key, an SSLContext that
    cannot be created as on some FIPS hosts) raises or returns None here, and the caller
    then leaves the request to stock requests, which raises the stock error at the stock
    place. A file that changed while it was read is not published either.
    """
    from urllib3.util import ssl_ as u

    ctx: Any = spec.factory(
        ssl_version=u.resolve_ssl_version(None), cert_reqs=u.resolve_cert_reqs(spec.cert_reqs)
    )
    built_class = type(ctx)  # (a variable: mypy would narrow ctx to `object` otherwise)
    if built_class is not spec.context_class:
        return None  # the class changed under us (truststore injected): re-key next time
    if getattr(ctx, "keylog_filename", None) != spec.keylog:
        return None  # SSLKEYLOGFILE changed between keying and building
    # An encrypted key always goes stock (which raises for it). Checked before the CA load,
    # or every such request would pay a bundle load to find that out.
    if spec.key_file and u._is_key_file_encrypted(spec.key_file):
        return None
    # What urllib3 does to a given context on every connection, done once:
    ctx.verify_mode = u.resolve_cert_reqs(spec.cert_reqs)
    if spec.check_hostname_off:
        ctx.check_hostname = False
    if spec.cafile is not None or spec.capath is not None:
        registry.count("ca_loads")
        ctx.load_verify_locations(spec.cafile, spec.capath, None)
    if spec.cert_file:
        try:
            ctx.load_cert_chain(spec.cert_file, spec.key_file, password=_no_password)
        except _NeedsPassword:
            return None
    ctx.set_alpn_protocols(list(spec.alpn))
    # The files must be the ones the key names: if one changed while we read it, this
    # context may hold either version, so it is not published.
    if trust_identity(spec.cafile, spec.capath) != spec.trust_id:
        return None
    if spec.client_identity() != spec.client_id:
        return None
    setattr(ctx, _SPEC_ATTR, spec)
    # Publication: from here on, immutable. Through object's own descriptor, because
    # truststore's SSLContext hides __class__ behind a read-only property.
    _SET_CLASS(ctx, _frozen_class(type(ctx)))
    return ctx


# os.environ.get raises and catches a KeyError when the variable is unset, which is the
# common case and costs a microsecond per request; its backing dict answers directly.
_ENVIRON_DATA = getattr(os.environ, "_data", None)
_KEYLOG_KEY = os.environ.encodekey("SSLKEYLOGFILE") if _ENVIRON_DATA is not None else None


def expected_keylog() -> str | None:
    """The key log file urllib3's create_urllib3_context would set right now."""
    if _ENVIRON_DATA is not None and _KEYLOG_KEY not in _ENVIRON_DATA:
        return None
    raw = os.environ.get("SSLKEYLOGFILE")
    return os.path.expandvars(raw) if raw else None
