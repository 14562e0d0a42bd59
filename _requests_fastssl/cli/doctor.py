"""``doctor``: versions, activation modes, the trust source asked about and what one load
of it costs (and so whether the shim can help), then a self-test or one real request."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any

from .. import __version__
from .green import green_libraries, httpx_line
from .modes import activation_modes
from .output import certificates, trust_for_verify_true, versions
from .programs import your_programs
from .report import Report, advice

__all__ = ["doctor"]

# Below this, a load is a small part of a new connection's cost (a handshake on loopback
# alone is about 1 ms): the shim saves little.
LITTLE_MS = 2.0


def doctor(
    verify: Any = True,
    self_test: bool = True,
    request: dict[str, Any] | None = None,
    *,
    timeout: float = 5.0,
    as_json: bool = False,
) -> int:
    """Exit status 0: healthy; 1: a finding (the last line says which)."""
    import ssl

    import requests  # noqa: F401  (imported so that the shim patches, or says why not)

    import requests_fastssl

    out = Report(as_json)
    out.say(f"requests-fastssl {__version__}", "version", __version__)
    out.say(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs",
        "python",
    )
    out.say(ssl.OPENSSL_VERSION, "openssl")
    found = {name: v for name, v in versions().items() if name != "requests-fastssl"}
    out.say(", ".join(f"{name} {v}" for name, v in found.items()), "versions", found)
    modes = activation_modes()
    out.say("activation modes in effect:", "activation_modes", modes)
    for line in modes:
        out.say(f"  {line}")
    green_libraries(out)
    httpx_line(out)
    programs_active = your_programs(out)
    _trust_source(out, verify, programs_active)
    part = "self-test in" if self_test else "the request from" if request else "doctor's shim in"
    out.say(
        f"{part} this process (doctor activated the shim itself, to test it: not what your "
        "programs get, said above):"
    )
    out.indent = "  "
    status = requests_fastssl.status()
    active = status.state.value == "active"
    state = {"state": status.state.value, "reason": status.reason}
    out.say(f"shim in this process: {status}", "shim", state)
    if not active:
        out.finding(f"the shim is not active here ({status})")
    if self_test:
        _self_test(out, active, timeout)
    if request is not None:
        from .request import one_request

        one_request(out, request, active, timeout)
    return out.end()


def _trust_source(out: Report, verify: Any, active: bool) -> None:
    """Say what the trust source for ``verify`` is, what stock pays to load it per new
    connection, and whether the shim has much to gain (a finding if it cannot be loaded);
    ``active``: whether the user's programs get the shim."""
    import ssl

    from .engine import ca_load_ms

    facts: dict[str, Any] = {}
    out.doc["trust_source"] = facts
    measure: Callable[[], float]
    if verify is False:
        facts.update(verify=False, source="the system store")
        out.say("trust source for verify=False: none checked, but stock loads the system store")
        what = "the system store"

        def measure() -> float:
            return ca_load_ms(None)

    else:
        if isinstance(verify, str):
            source, origin = verify, "--verify"
        else:
            source, origin = trust_for_verify_true()
        facts.update(verify=verify, source=source, origin=origin)
        shown = "True" if verify is True else repr(source)
        out.say(f"trust source for verify={shown}: {source} ({origin})")
        if os.path.exists(source) and not (os.path.isfile(source) or os.path.isdir(source)):
            facts["error"] = "neither a regular file nor a directory"
            out.say(f"one CA load: not tried, {source} is {facts['error']} (a FIFO, a device)")
            out.finding("the trust source is not a file; fix --verify or REQUESTS_CA_BUNDLE")
            return
        if os.path.isdir(source):
            out.say(
                "one CA load: a CA directory is read lazily by OpenSSL at each handshake, so "
                "stock pays little per connection; the shim leaves it to stock (ca-directory)"
            )
            facts["verdict"] = "little to gain here; a bundle file is where the shim helps"
            out.say(f"verdict: {facts['verdict']}")
            return
        what = ""

        def measure() -> float:
            nonlocal what
            cost = ca_load_ms(source)  # (raises first for a file that cannot be loaded)
            what = certificates(source)
            return cost

    try:
        cost = measure()
    except (OSError, ssl.SSLError) as exc:
        facts["error"] = str(exc)
        out.say(f"one CA load: failed ({exc}); every request with this trust would fail")
        out.finding("the trust source cannot be loaded; fix the file or REQUESTS_CA_BUNDLE")
        return
    facts.update(ca_load_ms=round(cost, 2), size=what)
    out.say(
        f"one CA load: {cost:.1f} ms ({what}, median of 5); stock requests pays this on every "
        "new connection, the shim once per process"
    )
    if cost < LITTLE_MS:
        facts["verdict"] = (
            f"little to gain: a load this cheap (under {LITTLE_MS:g} ms) is a small part of a "
            "new connection; the shim helps with large bundles such as certifi's"
        )
    elif active:
        facts["verdict"] = (
            f"the shim saves about {cost:.0f} ms of CPU per new connection after the first; "
            "requests on a kept-alive connection load nothing, with or without it"
        )
    else:
        facts["verdict"] = (
            f"the shim would save about {cost:.0f} ms of CPU per new connection after the "
            "first, but your programs do not get it (see above)"
        )
    out.say(f"verdict: {facts['verdict']}")


def _self_test(out: Report, active: bool, timeout: float) -> None:
    """Real requests to an embedded HTTPS server on 127.0.0.1; shows the counters move."""
    import tempfile

    import requests

    import requests_fastssl

    from .pki import INSTALL_HINT, certifi_plus, test_ca
    from .server import HTTPSServer, server_context

    try:
        ca = test_ca()
    except SystemExit:
        out.say(f"self-test: not run, it needs trustme: {INSTALL_HINT}", "self_test", None)
        out.skipped.append("the self-test (it needs trustme)")
        return
    calls = 3
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-doctor-") as tmp:
        bundle = certifi_plus(ca, tmp)
        with HTTPSServer(server_context(ca, ("127.0.0.1",))) as server:
            before = requests_fastssl.stats()
            statuses, errors = [], []
            for _ in range(calls):  # each a new Session, so a new connection
                try:
                    response = requests.get(server.url, verify=bundle, timeout=timeout)
                    statuses.append(str(response.status_code))
                except requests.RequestException as exc:
                    statuses.append(type(exc).__name__)
                    errors.append(exc)
            delta = requests_fastssl.stats().since(before)
    facts = {"statuses": statuses, "connections": delta.connections, "ca_loads": delta.ca_loads}
    out.doc["self_test"] = facts
    out.say(
        f"self-test: {calls} x requests.get() to an embedded HTTPS server on 127.0.0.1, each a "
        f"new connection, verify=<certifi + a test CA>: {', '.join(statuses)}"
    )
    if statuses != ["200"] * calls:
        first = f"{type(errors[0]).__name__}: {errors[0]}" if errors else ", ".join(statuses)
        hint = advice(errors[0], timeout) if errors else "see the statuses"
        facts.update(error=first, advice=hint)
        out.say(f"self-test: FAILED, the requests did not succeed: {first}; try: {hint}")
        out.finding("the self-test's requests failed")
        return
    if not active:
        out.say(
            f"self-test: the shim is off here, so stock requests loaded the bundle {calls} times"
        )
        return
    out.say(
        f"self-test: {delta.connections} connection(s) used shared contexts; "
        f"{delta.contexts_built} context(s) built with {delta.ca_loads} CA load(s); stock "
        f"requests would have made {calls}"
    )
    if delta.connections != calls or delta.ca_loads != 1:
        reasons = dict(delta.step_aside_reasons) or "none recorded"
        out.say(f"self-test: FAILED, the shim did not share as expected (step-asides: {reasons})")
        out.finding("the self-test did not share as expected")
