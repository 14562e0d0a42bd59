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

    def say(self, text: str, key: str | None = None, value: Any = None) -> None:
        if key is not None:
            self.doc[key] = text if value is None else value
        if not self.as_json:
            print(text, flush=True)

    def finding(self, text: str) -> None:
        self.findings.append(text)

    def end(self) -> int:
        status = 1 if self.findings else 0
        if self.findings:
            verdict = f"result: {len(self.findings)} finding(s): " + "; ".join(self.findings)
        else:
            verdict = "result: healthy: the shim is active and every check passed"
        self.doc.update(findings=self.findings, exit_status=status)
        self.say(verdict, "result")
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
    if isinstance(exc, requests.exceptions.SSLError):
        return "check --verify (the CA that issued the server's certificate) and the host name"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "could not connect: is the server up, and the host and port right?"
    if isinstance(exc, OSError):
        return "check the files named by --verify, --cert, --key and REQUESTS_CA_BUNDLE"
    return "see the error"
