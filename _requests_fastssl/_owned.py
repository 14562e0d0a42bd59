"""Contexts a connection is given (an adapter's, requests 2.32.3/2.32.4's): never shared, but once
a stock load has put their CA file in, later set-ups leave ``ca_certs`` out while the file holds
the same bytes (a load adds nothing OpenSSL's store holds). Only over the standard library's
own ``load_verify_locations`` (docs/design.md, Contexts a connection is given)."""

from __future__ import annotations

import weakref
from typing import Any

from ._files import FileCheck, read_checks
from ._genuine import GENUINE_CONTEXT

__all__ = ["loaded_already", "note_loaded"]

# The C type's own method: that type cannot be patched, the Python class above it can.
_GENUINE_LOAD = GENUINE_CONTEXT.__mro__[1].__dict__["load_verify_locations"]
# context -> the CA file (path and bytes) a stock load put in it
_loaded: weakref.WeakKeyDictionary[Any, FileCheck] = weakref.WeakKeyDictionary()


def _eligible(ctx: Any, inputs: dict[str, Any]) -> bool:
    return (
        type(ctx) is GENUINE_CONTEXT
        and GENUINE_CONTEXT.load_verify_locations is _GENUINE_LOAD
        and "load_verify_locations" not in getattr(ctx, "__dict__", {})
        and bool(inputs["ca_certs"])
        and not inputs["ca_cert_dir"]
        and inputs["ca_cert_data"] is None
    )


def loaded_already(inputs: dict[str, Any]) -> bool:
    """Whether the given context already holds exactly the CA file this set-up loads."""
    ctx = inputs["ssl_context"]
    if not _eligible(ctx, inputs):
        return False
    check = _loaded.get(ctx)
    return check is not None and check.path == inputs["ca_certs"] and check.unchanged()


def before_load(inputs: dict[str, Any]) -> FileCheck | None:
    """The file as it is before stock's load, to note once that load succeeded."""
    if not _eligible(inputs["ssl_context"], inputs):
        return None
    checks = read_checks((inputs["ca_certs"],))
    return checks[0] if checks else None


def note_loaded(ctx: Any, check: FileCheck) -> None:
    """Stock's load succeeded; if the file still holds what was read before it, that is
    what the context holds now (and whatever it held only during the load, as in stock)."""
    if check.unchanged():
        _loaded[ctx] = check


def forget_all() -> None:
    _loaded.clear()
