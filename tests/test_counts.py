"""The reason the shim exists: one CA load per trust source, not one per connection."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from support import PKI, LoadCounter, ServerFactory

import requests_fastssl


def _get(url: str, **kwargs: object) -> int:
    with requests.Session() as session:  # a new Session, pool and connection per call
        return session.get(url, headers={"Connection": "close"}, **kwargs).status_code  # type: ignore[arg-type]


@pytest.mark.urllib3_2
def test_300_concurrent_cold_requests_load_the_bundle_once(
    shim: None, make_server: ServerFactory, default_bundle: str, loads: LoadCounter
) -> None:
    server = make_server()
    before = requests_fastssl.stats()
    with ThreadPoolExecutor(300) as pool:
        statuses = list(pool.map(lambda _: requests.get(server.url).status_code, range(300)))
    assert statuses == [200] * 300
    assert loads.verify_locations == 1
    assert loads.default_certs == 0
    after = requests_fastssl.stats()
    assert after.contexts_built - before.contexts_built == 1
    assert after.ca_loads - before.ca_loads == 1
    assert after.reuses - before.reuses == 299


def test_stock_loads_the_bundle_per_connection(
    make_server: ServerFactory, default_bundle: str, loads: LoadCounter
) -> None:
    server = make_server()
    assert [_get(server.url) for _ in range(5)] == [200] * 5
    assert loads.verify_locations == 5


@pytest.mark.urllib3_2
def test_verify_false_loads_the_system_store_once(
    shim: None, make_server: ServerFactory, loads: LoadCounter
) -> None:
    server = make_server()
    with ThreadPoolExecutor(50) as pool:
        statuses = list(pool.map(lambda _: _get(server.url, verify=False), range(50)))
    assert statuses == [200] * 50
    # Stock's own effect on the handshake (its client chain, get_verified_chain()), once.
    assert (loads.verify_locations, loads.default_certs) == (0, 1)


def test_stock_verify_false_loads_the_system_store_per_connection(
    make_server: ServerFactory, loads: LoadCounter
) -> None:
    server = make_server()
    assert [_get(server.url, verify=False) for _ in range(3)] == [200] * 3
    assert loads.default_certs == 3


@pytest.mark.urllib3_2
def test_path_bundle_and_client_cert_load_once_each(
    shim: None, make_server: ServerFactory, pki: PKI, loads: LoadCounter
) -> None:
    server = make_server(client_certs="optional")
    for _ in range(10):
        assert _get(server.url, verify=pki.bundle, cert=pki.client_a.pair) == 200
    assert (loads.verify_locations, loads.cert_chains) == (1, 1)
    assert server.clients_seen == ["client-a"] * 10
