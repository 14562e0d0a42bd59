"""Adapters and instrumentation from the ecosystem, with and without the shim.

requests-toolbelt's adapters must behave as stock; responses, requests-mock and
OpenTelemetry's RequestsInstrumentor must keep working whichever of them and the shim came
first, and uninstalling the shim must leave their layers in place.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from requests_toolbelt.adapters.host_header_ssl import HostHeaderSSLAdapter
from requests_toolbelt.adapters.source import SourceAddressAdapter
from requests_toolbelt.adapters.ssl import SSLAdapter
from support import ServerFactory, session_with

import requests_fastssl

CLOSE = {"Connection": "close"}


def test_toolbelt_host_header_ssl_adapter(
    mode: str, make_server: ServerFactory, default_bundle: str
) -> None:
    server = make_server(names=("localhost",))  # the URL says 127.0.0.1
    session = session_with(HostHeaderSSLAdapter())
    assert session.get(server.url, headers={"Host": "localhost"}).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        session.get(server.url, headers=CLOSE)  # no Host header: the name must match
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url)  # nothing leaked into other sessions


@pytest.mark.filterwarnings("ignore:ssl.PROTOCOL_TLSv1_2 is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:'ssl_version' option is deprecated:FutureWarning")
@pytest.mark.filterwarnings("ignore:'ssl_version' option is deprecated:DeprecationWarning")
def test_toolbelt_ssl_adapter_keeps_its_protocol(
    mode: str, make_server: ServerFactory, default_bundle: str
) -> None:
    server = make_server(minimum_version=ssl.TLSVersion.TLSv1_3)
    assert requests.get(server.url).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):  # pinned to TLS 1.2: refused
        session_with(SSLAdapter(ssl.PROTOCOL_TLSv1_2)).get(server.url)


@pytest.mark.urllib3_2
def test_toolbelt_source_address_adapter_is_shared(
    mode: str, make_server: ServerFactory, default_bundle: str
) -> None:
    server = make_server()
    before = requests_fastssl.stats()
    session = session_with(SourceAddressAdapter("127.0.0.1"))
    for _ in range(3):
        assert session.get(server.url, headers=CLOSE).status_code == 200
    if mode == "shim":  # source_address is not a TLS setting: nothing to step aside for
        assert requests_fastssl.stats().since(before).connections == 3


def test_responses_before_and_after_the_shim(mode: str) -> None:
    import responses

    url = "https://api.example.test/thing"
    with responses.RequestsMock() as mocked:
        mocked.get(url, json={"mocked": True})
        assert requests.get(url).json() == {"mocked": True}
        requests_fastssl.install()
        assert requests.get(url).json() == {"mocked": True}
        requests_fastssl.uninstall()  # their patch of HTTPAdapter.send stays
        assert requests.get(url).json() == {"mocked": True}


def test_requests_mock_before_and_after_the_shim(mode: str) -> None:
    import requests_mock

    url = "https://api.example.test/thing"
    with requests_mock.Mocker() as mocked:
        mocked.get(url, json={"mocked": True})
        assert requests.get(url).json() == {"mocked": True}
        requests_fastssl.install()
        assert requests.get(url).json() == {"mocked": True}
        requests_fastssl.uninstall()
        assert requests.get(url).json() == {"mocked": True}


@pytest.fixture
def spans() -> Iterator[Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.mark.parametrize("first", ["opentelemetry", "shim"])
@pytest.mark.urllib3_2
def test_opentelemetry_requests_instrumentor_either_order(
    first: str, spans: Any, make_server: ServerFactory, default_bundle: str
) -> None:
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    provider, exporter = spans
    instrumentor = RequestsInstrumentor()
    original_send = requests.Session.send
    server = make_server()
    if first == "shim":
        requests_fastssl.install()
    instrumentor.instrument(tracer_provider=provider)
    try:
        if first == "opentelemetry":
            requests_fastssl.install()
        before = requests_fastssl.stats()
        for _ in range(3):
            assert requests.get(server.url, headers=CLOSE).status_code == 200
        assert len(exporter.get_finished_spans()) == 3  # theirs ran
        assert requests_fastssl.stats().since(before).connections == 3  # ours too
        requests_fastssl.uninstall()
        assert requests.Session.send is not original_send  # their layer is still there
        assert requests.get(server.url).status_code == 200
        assert len(exporter.get_finished_spans()) == 4
    finally:
        instrumentor.uninstrument()
    assert requests.Session.send is original_send
