"""doctor --url: one request to the user's server on a new connection, bounded as a whole,
and what the shim in doctor's process did for it (shared, or why not)."""

from __future__ import annotations

import threading
from typing import Any

from .report import Report, advice

__all__ = ["one_request"]

# doctor --url reads this much of the answer at most: it needs the status, not the body.
BODY_LIMIT = 64 * 1024


def one_request(out: Report, request: dict[str, Any], active: bool, timeout: float) -> None:
    """doctor --url: one GET on a new connection, and what the shim did for it."""
    import requests

    import requests_fastssl

    url = request["url"]
    shown = ", ".join(f"{k}={v!r}" for k, v in request.items() if k != "url")
    facts: dict[str, Any] = {"url": url, "verify": request["verify"], "cert": request["cert"]}
    out.doc["request"] = facts
    before = requests_fastssl.stats()
    done: list[Any] = []

    def get() -> None:
        import warnings

        from urllib3.exceptions import InsecureRequestWarning

        try:
            # The user asked for verify=False: urllib3's warning would land in the report;
            # the report says so in its own line (below), and only for doctor's own request.
            with requests.Session() as session, warnings.catch_warnings():
                warnings.simplefilter("ignore", InsecureRequestWarning)
                response = session.get(
                    url, verify=request["verify"], cert=request["cert"], timeout=timeout,
                    stream=True,
                )  # fmt: skip
                with response:  # (a bounded read: a body that never ends is not waited for)
                    response.raw.read(BODY_LIMIT, decode_content=False)
            done.append(response)
        except Exception as exc:  # (requests raises more than RequestException: OSError, ...)
            done.append(exc)

    # requests' timeout bounds each read, not the whole answer: a server trickling a byte
    # at a time never trips it. The request runs in a thread of its own, waited for at most
    # three times --timeout (connecting, the handshake, the answer); left behind, it ends
    # with the process.
    if request["verify"] is False:
        facts["verification"] = "off"
        out.say(
            "verification: off (--verify false): the server's certificate and host name are not "
            "checked, so anyone on the path could answer this request"
        )
    worker = threading.Thread(target=get, name="requests-fastssl-doctor", daemon=True)
    worker.start()
    worker.join(3 * timeout)
    if not done:
        hint = "the server answers too slowly, or never stops; --timeout waits longer"
        facts.update(error=f"no complete answer within {3 * timeout:g} s", advice=hint)
        out.say(f"request: GET {url} ({shown}): {facts['error']}; try: {hint}")
        out.finding("the request did not end in time")
    elif isinstance(done[0], Exception):
        exc = done[0]
        hint = advice(exc, timeout)
        facts.update(error=f"{type(exc).__name__}: {exc}", advice=hint)
        out.say(f"request: GET {url} ({shown}): {type(exc).__name__}: {exc}; try: {hint}")
        out.finding(f"the request failed ({type(exc).__name__})")
    else:
        facts["status"] = done[0].status_code
        out.say(f"request: GET {url} ({shown}): HTTP {done[0].status_code}")
    delta = requests_fastssl.stats().since(before)
    if not active:
        facts["shared"] = False
        out.say("shared: no, the shim is off in this process (see above); stock requests ran")
        return
    reasons = dict(delta.step_aside_reasons)
    facts.update(shared=bool(delta.connections), step_aside_reasons=reasons)
    if reasons:
        from _requests_fastssl._policy import Reason

        texts = {reason.code: reason.text for reason in Reason}
        for code in reasons:
            why = texts.get(code, "see docs/design.md, step-aside rules")
            out.say(f"shared: no, left to stock requests ({code}): {why}")
    elif delta.connections:
        built = (
            f"built now, with {delta.ca_loads} CA load(s)"
            if delta.contexts_built
            else "one built earlier in this process"
        )
        out.say(
            f"shared: yes, {delta.connections} TLS connection(s) used a shared context ({built})"
        )
    elif delta.build_failures:
        out.say(
            "shared: no, building its context raised stock's own error (the request raised it, "
            "as stock requests does); fix the files"
        )
    else:
        out.say("shared: no TLS connection was made (the request failed before, or was not HTTPS)")
