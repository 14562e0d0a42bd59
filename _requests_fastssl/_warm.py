"""``warm()``: build at start-up the shared context a later request will use, from the set-up
inputs requests' own steps up to the connection give (a forking master's workers load nothing).
``REQUESTS_FASTSSL_WARM=1`` warms ``verify=True`` once requests is imported, never earlier."""

from __future__ import annotations

import os
from typing import Any

from ._observe import _logger, switch
from ._state import STATE

__all__ = ["ENV_WARM", "warm", "warm_from_env"]

ENV_WARM = "REQUESTS_FASTSSL_WARM"
# Never resolved or contacted: the host only has to make requests build an HTTPS pool.
_URL = "https://requests-fastssl.invalid/"


def warm(verify: Any = True, cert: Any = None, *, trust_env: bool = True) -> bool:
    """Build now the shared context ``requests.get(url, verify=verify, cert=cert)`` would use
    for an HTTPS URL; returns whether one is ready (imports requests). ``verify`` and ``cert``
    as in requests; with ``trust_env``, ``verify=True`` means ``REQUESTS_CA_BUNDLE`` /
    ``CURL_CA_BUNDLE`` when set. Bad settings raise what the request would (a missing bundle:
    ``OSError``). False: not active, or it steps aside (``stats().step_aside_reasons``)."""
    import importlib

    # (not requests.adapters.X: in the program's `import requests` the package lacks it yet)
    adapters = importlib.import_module("requests.adapters")
    from requests.models import PreparedRequest

    from ._hook import shared_context
    from ._policy import INPUTS, Reason, StockError
    from ._registry import REGISTRY

    if not STATE.active:
        return False
    if trust_env and (verify is True or verify is None):
        # Session.merge_environment_settings, which requests.get goes through.
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or verify
    request = PreparedRequest()
    request.prepare(method="GET", url=_URL)
    adapter = adapters.HTTPAdapter()
    try:
        if hasattr(adapter, "get_connection_with_tls_context"):
            pool = adapter.get_connection_with_tls_context(request, verify, None, cert)
        else:  # requests < 2.32.2: the pool by URL alone; cert_verify sets its TLS inputs
            pool = adapter.get_connection(_URL, None)
        adapter.cert_verify(pool, _URL, verify, cert)
        conn = pool._new_conn()  # (makes no connection)
        names = INPUTS - {"sock", "server_hostname", "tls_in_tls"}  # (no socket yet; host below)
        inputs = {name: getattr(conn, name, None) for name in names}
        inputs["server_hostname"] = conn.host
        ctx = shared_context(inputs)
        if ctx in (Reason.NOT_A_FILE, Reason.NO_PROCFS, Reason.BUILD_FAILED):
            ctx = _stock_steps(inputs)  # what the request would raise, from stock's own steps
        if isinstance(ctx, StockError):  # (requests hands urllib3's error on as its own)
            from requests.exceptions import SSLError

            raise SSLError(ctx.error) from ctx.error
        if isinstance(ctx, Reason):
            REGISTRY.step_aside(ctx)  # counted (and logged once) as the request's would be
            return False
        return shared_context(inputs) is ctx
    finally:
        adapter.close()


def _stock_steps(inputs: dict[str, Any]) -> Any:
    """Stock's set-up steps for these inputs, socket-less: the StockError they raise, if any."""
    from ._contexts import build
    from ._policy import Reason, StockError

    connection, ssl_ = STATE.settings.connection, STATE.settings.ssl_  # type: ignore[union-attr]
    try:
        build(inputs, connection, ssl_, tuple(ssl_.ALPN_PROTOCOLS), None)
    except StockError as failed:
        return failed
    except Exception:
        pass
    return Reason.BUILD_FAILED


def warm_from_env() -> None:
    """Warm ``verify=True`` if ``REQUESTS_FASTSSL_WARM`` asks. Never raises (this runs inside the
    program's ``import requests``): a failure is logged; the first request raises it as stock."""
    if not switch(ENV_WARM, unknown=False):
        return
    log = _logger()
    from ._policy import Reason
    from ._registry import REGISTRY

    before = REGISTRY.stats()
    try:
        ready = warm()
    except Exception as exc:
        log.warning(
            "requests_fastssl: %s: warming verify=True failed, as every verify=True request "
            "will: %s: %s",
            *(ENV_WARM, type(exc).__name__, exc),
        )
        return
    if not ready:
        reasons = REGISTRY.stats().since(before).step_aside_reasons
        texts = {r.code: r.text for r in Reason}
        why = "; ".join(f"{code}: {texts.get(code, '')}" for code in reasons) or "unknown"
        log.warning(
            "requests_fastssl: %s: verify=True is left to stock requests here (%s)", ENV_WARM, why
        )
