"""Building one shared context as urllib3 would for a pool, and keeping every connection
made with it equivalent to a stock one.

Stock urllib3 creates a context for every new connection of a pool without one, and then,
connection after connection, applies the same steps to it: write ``verify_mode`` (and maybe
``check_hostname``), load the CA source and the client certificate, set ALPN, wrap the
socket. ``build`` does those steps once, with the factory and arguments urllib3 would use,
then publishes the context by switching its class to a frozen subclass.

A published context is handed to pools, and urllib3 repeats the steps on it for every new
connection. The frozen class turns each step into a check instead of a change:
- a write of the value the context already has is a no-op;
- ``load_verify_locations`` / ``load_cert_chain`` / ``set_alpn_protocols`` with exactly the
  arguments it was built with, while the files read then are unchanged (``FileCheck``), is a
  no-op;
- anything else in a connection set-up (other arguments, a changed file, a changed urllib3
  setting seen at ``wrap_socket``) makes *that connection* use a private context built by
  replaying the same steps on a fresh one, which is exactly what stock would have used;
- any other change raises ``FrozenContextError``: a shared context that changed would
  change trust or identity for every pool holding it.
So equivalence does not rest on the key being right: the key only decides how often the
fast path is taken.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from ._errors import FrozenContextError
from ._keys import FileCheck, Spec
from ._state import STATE

if TYPE_CHECKING:
    from ._compat import Target
    from ._registry import Registry

__all__ = ["build", "open_setup", "spec_of"]

# SSLContext methods that change a context and that urllib3 never calls on a context it is
# given: a frozen context refuses them.
_MUTATORS = (
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
_SHARED = "_requests_fastssl_shared"
_STATE_ATTR = "_requests_fastssl_built"
_SET_CLASS = object.__dict__["__class__"].__set__
_frozen_classes: dict[type, type] = {}
_local = threading.local()


class _NeedsPassword(Exception):
    """The client key is encrypted: stock urllib3 raises or prompts, so we step aside."""


def _no_password() -> str:
    # Passed to load_cert_chain so OpenSSL never prompts on a terminal while we build.
    raise _NeedsPassword


class _Built:
    """What a published context was built from: its key, the files read, the ALPN list."""

    __slots__ = (
        "alpn",
        "ca_checks",
        "chain_checks",
        "echo",
        "echo_skips",
        "expected",
        "forked",
        "registry",
        "spec",
    )

    def __init__(self, spec: Spec, registry: Registry) -> None:
        self.spec = spec
        self.registry = registry
        self.forked = False  # in a handshake in another thread when this process forked
        self.ca_checks: tuple[FileCheck, ...] = ()
        self.chain_checks: tuple[FileCheck, ...] = ()
        self.alpn: list[str] = []
        # The factory's arguments, for pools whose connections must still call it (below).
        self.echo: dict[str, Any] | None = None
        self.echo_skips: list[None] = [None]  # the build's own call stands for the first
        # The steps urllib3 takes on a given context for such a pool, in order.
        self.expected = tuple(
            name
            for name, wanted in (
                ("load_verify_locations", bool(spec.cafile or spec.capath)),
                ("load_cert_chain", bool(spec.cert_file)),
                ("set_alpn_protocols", True),
            )
            if wanted
        )


class _Setup:
    """One connection set-up on one thread: the steps urllib3 took on a shared context."""

    __slots__ = ("calls", "private")

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.private: Any = None  # the fresh context this connection uses instead


def _setups() -> dict[int, _Setup]:
    try:
        setups: dict[int, _Setup] = _local.setups
    except AttributeError:
        setups = _local.setups = {}
    return setups


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
        if name == "verify_mode" and _called_from_urllib3():
            # urllib3 starts every connection set-up on a given context with this write.
            _setups()[id(self)] = _Setup()
            echo = _built(self).echo
            target = STATE.target
            if echo is not None and target is not None:
                # Stock calls the factory right before this write, for every connection; with
                # the deprecated ssl_version it warns each time. Called again here, as from
                # urllib3's call site, its warnings (and any filter turning them into errors)
                # are stock's, connection for connection; the build's own call counts as the
                # first connection's (list.pop: atomic). The context made is dropped.
                try:
                    _built(self).echo_skips.pop()
                except IndexError:
                    target.call_factory(**echo)
        return  # same value: nothing to do, and OpenSSL is not touched
    raise _refusal(f"set {name}={value!r}")


def open_setup(ctx: Any) -> None:
    """Start a urllib3 connection set-up on ``ctx`` on this thread, as urllib3's first write
    to a context it is given does (``_proxyleg``: that write went to the fresh context)."""
    _setups()[id(ctx)] = _Setup()


def _called_from_urllib3() -> bool:
    # Two frames up: the code that wrote the attribute (ours is one frame up).
    caller = sys._getframe(2).f_globals.get("__name__", "")
    return isinstance(caller, str) and caller.startswith("urllib3.")


def _frozen_delattr(self: Any, name: str) -> None:
    raise _refusal(f"delete {name}")


def _built(ctx: Any) -> _Built:
    built: _Built = ctx.__dict__[_STATE_ATTR]
    return built


def _step(self: Any, name: str, args: tuple[Any, ...], matches: bool) -> None:
    """One load/set step of a connection set-up: a no-op if it matches what the context
    holds, else the connection goes private from here on."""
    setup = _setups().get(id(self))
    if setup is None:
        # Not within a urllib3 connection set-up on this thread: a change from elsewhere.
        if matches:
            return
        raise _refusal(f"call {name}() with other arguments or files than it was built with")
    if setup.private is None:
        if matches:
            setup.calls.append((name, args))
            return
        setup.private = _replay(self, setup, next_step=name)
    getattr(setup.private, name)(*args)


def _frozen_load_verify_locations(
    self: Any, cafile: Any = None, capath: Any = None, cadata: Any = None
) -> None:
    built = _built(self)
    spec = built.spec
    matches = (cafile, capath, cadata) == (spec.cafile, spec.capath, None) and _unchanged(
        self, built, built.ca_checks
    )
    _step(self, "load_verify_locations", (cafile, capath, cadata), matches)


def _frozen_load_cert_chain(
    self: Any, certfile: Any, keyfile: Any = None, password: Any = None
) -> None:
    built = _built(self)
    spec = built.spec
    secret = spec.pool_tls.key_password
    matches = (
        password == (None if secret is None else secret.value)
        and (certfile, keyfile) == (spec.cert_file, spec.key_file)
        and _unchanged(self, built, built.chain_checks)
    )
    args = (certfile, keyfile) if password is None else (certfile, keyfile, password)
    _step(self, "load_cert_chain", args, matches)


def _frozen_set_alpn_protocols(self: Any, alpn_protocols: Any) -> None:
    matches = list(alpn_protocols) == _built(self).alpn
    _step(self, "set_alpn_protocols", (alpn_protocols,), matches)


def _unchanged(ctx: Any, built: _Built, checks: tuple[FileCheck, ...]) -> bool:
    if all(check.unchanged() for check in checks):
        return True
    # A file changed since the build: stock reads the new one on the next new connection,
    # so this context must not be handed to new pools again.
    built.registry.discard(built.spec, ctx)
    return False


def _finish(self: Any) -> Any:
    """The context a new connection's handshake uses: this one, or a private one."""
    setup = _setups().pop(id(self), None)
    if setup is None:
        return self  # not a urllib3 connection set-up: the context as it was built
    if setup.private is None:
        built = _built(self)
        target = STATE.target
        if (
            built.forked
            # A step the pool's attributes should have caused was not taken (something
            # cleared them after cert_verify): stock would have loaded other certificates.
            or tuple(name for name, _ in setup.calls) != built.expected
            # A urllib3 setting changed since the build.
            or target is None
            or target.settings() != built.spec.settings
        ):
            setup.private = _replay(self, setup)
            if built.forked:
                built.registry.discard(built.spec, self)
    if setup.private is not None:
        _built(self).registry.count("private_connections")
        return setup.private
    _built(self).registry.count("connections")
    return self


def _frozen_class(base: type) -> type:
    """The frozen subclass of ``base`` (one per base: truststore may swap the class)."""
    frozen = _frozen_classes.get(base)
    if frozen is None:
        namespace: dict[str, Any] = {
            "__slots__": (),
            "__module__": "requests_fastssl",
            "__setattr__": _frozen_setattr,
            "__delattr__": _frozen_delattr,
            "load_verify_locations": _frozen_load_verify_locations,
            "load_cert_chain": _frozen_load_cert_chain,
            "set_alpn_protocols": _frozen_set_alpn_protocols,
            _SHARED: True,
        }
        for name in _MUTATORS:
            if hasattr(base, name):
                namespace[name] = _make_refuser(name)
        for name in ("wrap_socket", "wrap_bio"):  # one call per new TLS connection
            if hasattr(base, name):
                namespace[name] = _finishing(name)
        frozen = type(f"Shared{base.__name__}", (base,), namespace)
        # setdefault: two threads building their first context of a new base agree on one.
        frozen = _frozen_classes.setdefault(base, frozen)
    return frozen


def _make_refuser(name: str) -> Any:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise _refusal(f"call {name}()")

    refuse.__name__ = name
    return refuse


# Shared contexts in a handshake right now, by thread. OpenSSL takes locks inside a context
# during a handshake (certificate lookups in its store): a context another thread was using
# when the process forked may carry a lock that nobody in the child will ever release.
_handshaking: dict[int, Any] = {}


def _after_fork_in_child() -> None:
    # (Only a mark: the registry's lock may not be usable yet in this handler.)
    for ctx in _handshaking.values():
        _built(ctx).forked = True  # connections of pools holding it get private contexts
    _handshaking.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _finishing(name: str) -> Any:
    def wrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = _finish(self)
        if ctx is not self:
            return getattr(ctx, name)(*args, **kwargs)
        thread = threading.get_ident()
        _handshaking[thread] = self
        try:
            return getattr(super(type(self), self), name)(*args, **kwargs)
        finally:
            _handshaking.pop(thread, None)

    wrap.__name__ = name
    return wrap


def spec_of(ctx: object) -> Spec | None:
    """The spec a shared context was built for; None for any other object."""
    if getattr(type(ctx), _SHARED, False):
        return _built(ctx).spec
    return None


def factory_kwargs(target: Target, spec: Spec) -> dict[str, Any]:
    """The keyword arguments urllib3 passes its factory for such a pool."""
    connection = target.connection
    tls = spec.pool_tls
    values = {
        "ssl_version": connection.resolve_ssl_version(tls.ssl_version),
        "ssl_minimum_version": tls.ssl_minimum_version,
        "ssl_maximum_version": tls.ssl_maximum_version,
        "cert_reqs": connection.resolve_cert_reqs(spec.cert_reqs),
    }
    return {name: values[name] for name in target.factory_kwargs}


def check_hostname_off(target: Target, spec: Spec | None = None) -> bool:
    """Whether urllib3 2.x writes check_hostname=False on every connection of such a pool
    (it then matches host names or fingerprints itself, after the handshake)."""
    if not target.urllib3_v2:
        return False  # 1.26's factory turns it off, and matches host names itself
    tls = spec.pool_tls if spec is not None else None
    ssl_ = target.ssl_
    return bool(
        (
            tls is not None
            and (tls.assert_fingerprint or tls.assert_hostname or tls.assert_hostname is False)
        )
        or ssl_.IS_PYOPENSSL
        or not ssl_.HAS_NEVER_CHECK_COMMON_NAME
    )


def _fresh(target: Target, spec: Spec) -> Any:
    """A new context with the steps urllib3 takes before any load, as for a stock pool."""
    ctx = target.call_factory(**factory_kwargs(target, spec))
    ctx.verify_mode = target.connection.resolve_cert_reqs(spec.cert_reqs)
    if check_hostname_off(target, spec):
        ctx.check_hostname = False
    return ctx


def _replay(ctx: Any, setup: _Setup, next_step: str = "") -> Any:
    """The context stock urllib3 would have for this connection so far: a fresh one, the
    steps taken, and the system store a stock pool without CA paths loads first.

    Stock loads the system store exactly when the pool has no CA paths, and then urllib3
    never calls load_verify_locations, the first of its loads: so it did if no CA step was
    taken and none is being taken now (``next_step``)."""
    target = STATE.target
    assert target is not None  # a context is only ever built with a target
    private = _fresh(target, _built(ctx).spec)
    ca_step = "load_verify_locations"
    if (
        next_step != ca_step
        and all(name != ca_step for name, _ in setup.calls)
        and hasattr(private, "load_default_certs")
    ):
        private.load_default_certs()
    for name, args in setup.calls:
        getattr(private, name)(*args)
    return private


def _lasting(checks: list[FileCheck]) -> Exception:
    """A load failure that the same files will give again: the registry remembers it while
    every file is unchanged (files that could not even be read are not remembered)."""
    from ._registry import Lasting

    if not all(check.usable() for check in checks):
        return RuntimeError("a file could not be read")
    frozen = tuple(checks)
    return Lasting(lambda: all(check.unchanged() for check in frozen))


def build(spec: Spec, registry: Registry) -> Any | None:
    """Build, load and freeze the context for ``spec``; None if stock should handle it.

    Every failure (missing or unreadable file, bad PEM, encrypted key, an SSLContext that
    cannot be created as on some FIPS hosts) raises or returns None here, and the caller
    then leaves the request to stock requests, which raises the stock error at the stock
    place. A file or setting that changed while it was read is not published either.
    """
    target = STATE.target
    if target is None:
        return None
    # An encrypted key without a password goes stock (which raises for it). Checked before
    # the CA load, or every such request would pay a bundle load to find that out.
    secret = spec.pool_tls.key_password
    if secret is None and spec.key_file and target.ssl_._is_key_file_encrypted(spec.key_file):
        return None
    built = _Built(spec, registry)
    if spec.pool_tls.ssl_version is not None:
        built.echo = factory_kwargs(target, spec)
    ctx = _fresh(target, spec)
    built_class = type(ctx)  # (a variable: mypy would narrow ctx to `object` otherwise)
    if built_class is not target.context_class():
        return None  # a factory that returns another class: not ours to judge
    if spec.cafile or spec.capath:
        checks = [FileCheck(p, d) for p, d in ((spec.cafile, False), (spec.capath, True)) if p]
        if not all(check.usable() for check in checks):
            # Not a regular file we could read (a pipe, /dev/fd/N from a shell's <(...)):
            # loading it would consume what stock's own load must read.
            return None
        registry.count("ca_loads")
        try:
            if spec.cafile:
                with checks[0].snapshot() as cafile:  # the bytes every check compares to
                    ctx.load_verify_locations(cafile, spec.capath, None)
            else:
                ctx.load_verify_locations(None, spec.capath, None)
        except OSError as exc:  # (ssl.SSLError included)
            raise _lasting(checks) from exc
        built.ca_checks = tuple(checks)
    if spec.cert_file:
        paths = [spec.cert_file, spec.key_file] if spec.key_file else [spec.cert_file]
        checks = [FileCheck(p, False) for p in paths]
        if not all(check.usable() for check in checks):
            return None  # (as above: never read what stock has to read)
        password = _no_password if secret is None else secret.value
        try:
            with contextlib.ExitStack() as stack:
                files = [stack.enter_context(check.snapshot()) for check in checks]
                ctx.load_cert_chain(files[0], files[1] if spec.key_file else None, password)
        except _NeedsPassword:
            return None
        except OSError as exc:  # not a certificate, a key that does not match, ...
            raise _lasting([*built.ca_checks, *checks]) from exc
        built.chain_checks = tuple(checks)
    built.alpn = list(target.ssl_.ALPN_PROTOCOLS)
    ctx.set_alpn_protocols(built.alpn)
    # The files and settings must be the ones the key names: if one changed since it was
    # read, it is not published (a rebuild will read the new one, as stock would). Where
    # there is no snapshot to load from, this also catches a change during the load.
    for check in (*built.ca_checks, *built.chain_checks):
        if not check.unchanged():
            return None
    if target.settings() != spec.settings:
        return None
    ctx.__dict__[_STATE_ATTR] = built
    # Publication: from here on, immutable. Through object's own descriptor, because
    # truststore's SSLContext hides __class__ behind a read-only property.
    _SET_CLASS(ctx, _frozen_class(type(ctx)))
    return ctx
