"""What ``doctor`` found, as lines as it goes or as one JSON document (``--json``), its exit
status, and what to try next when a request to the user's server fails."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Report", "advice"]


class Report:
    """What doctor found: printed line by line as it goes, or gathered into one JSON document
    (``--json``). A finding is something wrong; any finding makes the exit status 1."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.doc: dict[str, Any] = {}
        self.findings: list[str] = []
        self.skipped: list[str] = []  # checks not run: the verdict must not claim them
        self.indent = ""  # the lines of a part, under its heading (the JSON has no indent)

    def say(self, text: str, key: str | None = None, value: Any = None) -> None:
        if key is not None:
            self.doc[key] = text if value is None else value
        if not self.as_json:
            print(self.indent + text, flush=True)

    def finding(self, text: str) -> None:
        self.findings.append(text)

    def end(self) -> int:
        status, self.indent = 1 if self.findings else 0, ""
        if self.findings:
            verdict = f"result: {len(self.findings)} finding(s): " + "; ".join(self.findings)
        elif self.skipped:
            verdict = (
                "result: healthy: your programs get the shim and every check that ran passed "
                "(not run: " + "; ".join(self.skipped) + ")"
            )
        else:
            verdict = "result: healthy: your programs get the shim and every check passed"
        self.doc.update(findings=self.findings, skipped=self.skipped, exit_status=status)
        self.say(verdict, "result", verdict.removeprefix("result: "))
        if self.as_json:
            print(json.dumps(self.doc, indent=2, default=str))
        return status


def advice(exc: BaseException, timeout: float) -> str:
    """What to try next, for what a request to a server of the user's raised."""
    import requests

    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return f"no connection within {timeout:g} s: is the host reachable, the port open? "
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return (
            f"connected, but no answer within {timeout:g} s (a stuck load balancer, or not TLS "
            "on that port?); --timeout waits longer"
        )
    if isinstance(exc, requests.exceptions.ProxyError):
        return "the proxy failed: check HTTPS_PROXY / https_proxy / ALL_PROXY and NO_PROXY"
    text = str(exc)
    if isinstance(exc, requests.exceptions.SSLError):
        if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
            return "the server does not speak TLS on that port (plain HTTP?): check the port"
        if "EOF" in text or "reset" in text.lower():
            return (
                "the server closed the connection during the TLS handshake: does it want a "
                "client certificate (--cert), or another TLS version?"
            )
        return "check --verify (the CA that issued the server's certificate) and the host name"
    if isinstance(exc, requests.exceptions.ConnectionError):
        if "RemoteDisconnected" in text or "BadStatusLine" in text:
            return "connected, but the server's answer was not HTTP, or it hung up: check the URL"
        return "could not connect: is the server up, and the host and port right?"
    if isinstance(
        exc, requests.exceptions.ChunkedEncodingError | requests.exceptions.ContentDecodingError
    ):
        return "the server's answer was cut short or garbled: check the server"
    if isinstance(exc, requests.exceptions.RequestException):
        return "see the error: the request itself failed"
    if isinstance(exc, OSError):  # (requests' own errors are OSErrors too: handled above)
        return "check the files named by --verify, --cert, --key and REQUESTS_CA_BUNDLE"
    return "see the error"
