"""``warm()``: build at start-up the shared context a later request will use.

A process's first HTTPS request pays the CA load; a server that forks workers pays it once
per worker. Warming runs what a request runs up to the connection (requests' own pool
lookup and ``cert_verify``, on a throwaway adapter, then the pool's own connection object),
and hands the inputs that connection would give urllib3's set-up to the same decision a
connection makes, so the context it leaves is the one a later request finds. Contexts
complete before a fork are used by the child (``_registry``), which is what makes a warming
master's workers load nothing.

``REQUESTS_FASTSSL_WARM=1`` warms ``verify=True`` whenever the shim becomes active, that is
when the program imports requests, never earlier.
"""

from __future__ import annotations

import os
from typing import Any

from ._state import STATE

__all__ = ["ENV_WARM", "warm", "warm_from_env"]

ENV_WARM = "REQUESTS_FASTSSL_WARM"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")
# Never resolved or contacted: the host only has to make requests build an HTTPS pool.
_URL = "https://requests-fastssl.invalid/"


def warm(verify: Any = True, cert: Any = None, *, trust_env: bool = True) -> bool:
    """Build now the shared context that ``requests.get(url, verify=verify, cert=cert)``
    would use for an HTTPS URL; returns whether one is ready.

    ``verify`` and ``cert`` take what requests takes. With ``trust_env`` (requests'
    default) ``verify=True`` means ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` when set, as
    in a Session. Bad settings raise the error the request would raise (a missing bundle:
    ``OSError``). False: the shim is not active, or steps aside for these settings
    (``stats().step_aside_reasons`` says why); requests then works as stock. Imports
    requests if the program has not yet.
    """
    import importlib

    # Not `requests.adapters.X`: inside the program's `import requests` (the env switch) the
    # package does not have the attribute yet, while the module is complete.
    adapters = importlib.import_module("requests.adapters")
    from requests.models import PreparedRequest

    from ._hook import shared_context
    from ._policy import Reason

    if not STATE.active:
        return False
    if trust_env and (verify is True or verify is None):
        # Session.merge_environment_settings, which requests.get goes through.
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or verify
    request = PreparedRequest()
    request.prepare(method="GET", url=_URL)
    adapter = adapters.HTTPAdapter()
    try:
        pool = adapter.get_connection_with_tls_context(request, verify, None, cert)
        adapter.cert_verify(pool, _URL, verify, cert)
        conn = pool._new_conn()  # (makes no connection)
        inputs = {name: getattr(conn, name, None) for name in _INPUTS}
        inputs["server_hostname"] = conn.host
        ctx = shared_context(inputs)
        if ctx is Reason.NOT_A_FILE or ctx is Reason.BUILD_FAILED:
            # What the request would raise: stock's own set-up, on a socket-less call.
            _stock_error(inputs)
        if isinstance(ctx, Reason):
            from ._registry import REGISTRY

            REGISTRY.step_aside(ctx)  # counted (and logged once) as the request's would be
            return False
        return True
    finally:
        adapter.close()


_INPUTS = (
    "cert_reqs", "ssl_version", "ssl_minimum_version", "ssl_maximum_version", "cert_file",
    "key_file", "key_password", "ca_certs", "ca_cert_dir", "ca_cert_data", "assert_hostname",
    "assert_fingerprint", "ssl_context",
)  # fmt: skip


def _stock_error(inputs: dict[str, Any]) -> None:
    """Raise what a request raises for these inputs before any handshake: urllib3's
    set-up raises its SSLError, which requests hands its caller as its own SSLError."""
    import urllib3.util.ssl_ as ssl_
    from requests.exceptions import SSLError

    ctx = ssl_.create_urllib3_context()
    ca = (inputs["ca_certs"], inputs["ca_cert_dir"], inputs["ca_cert_data"])
    try:
        if any(ca):
            ctx.load_verify_locations(*ca)
        if inputs["cert_file"]:
            args = (inputs["cert_file"], inputs["key_file"])
            password = inputs["key_password"]
            ctx.load_cert_chain(*args, *(() if password is None else (password,)))
    except OSError as exc:
        raise SSLError(exc) from exc


def warm_from_env() -> None:
    """Warm ``verify=True`` if ``REQUESTS_FASTSSL_WARM`` asks for it. Never raises: this
    runs inside the program's ``import requests``, which must not fail because of us; a
    failure is logged, and the first request then raises its stock error itself."""
    value = os.environ.get(ENV_WARM)
    if value is None or value.strip().lower() in _OFF:
        return
    import logging

    log = logging.getLogger("requests_fastssl")
    if value.strip().lower() not in _ON:
        log.warning("requests_fastssl: %s=%r not understood (1 or 0); not warming", ENV_WARM, value)
        return
    from ._registry import REGISTRY

    before = REGISTRY.stats()
    try:
        ready = warm()
    except Exception as exc:
        log.warning(
            "requests_fastssl: %s: warming verify=True failed, as every verify=True request "
            "will: %s: %s",
            ENV_WARM,
            type(exc).__name__,
            exc,
        )
        return
    if not ready:
        reasons = REGISTRY.stats().since(before).step_aside_reasons
        from ._policy import Reason

        texts = {r.code: r.text for r in Reason}
        why = "; ".join(f"{code}: {texts.get(code, '')}" for code in reasons) or "unknown"
        log.warning(
            "requests_fastssl: %s: verify=True is left to stock requests here (%s)",
            ENV_WARM,
            why,
        )
