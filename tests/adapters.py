"""Adapters that real code mounts, each with TLS ideas of its own: the regressions tests and
the stress run (tests/stress.py) use the same ones."""

from __future__ import annotations

import ssl
from typing import Any

from requests.adapters import HTTPAdapter


class ContextAdapter(HTTPAdapter):
    """An adapter with its own SSLContext for direct and/or proxied requests (R3, R3b, R4)."""

    def __init__(self, ctx: ssl.SSLContext, *, direct: bool = True, proxied: bool = False):
        self._ctx, self._direct, self._proxied = ctx, direct, proxied
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._direct:
            kwargs["ssl_context"] = self._ctx
        super().init_poolmanager(*args, **kwargs)

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        if self._proxied:
            kwargs["ssl_context"] = self._ctx
        return super().proxy_manager_for(proxy, **kwargs)


class NoVerifyAdapter(HTTPAdapter):
    """exchangelib's pattern: verification off in cert_verify, whatever the session says."""

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        super().cert_verify(conn=conn, url=url, verify=False, cert=cert)


class HostHeaderAdapter(HTTPAdapter):
    """requests-toolbelt's HostHeaderSSLAdapter: assert_hostname set per request in send()."""

    def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        host = request.headers.get("Host")
        pool_kw = self.poolmanager.connection_pool_kw
        if host:
            pool_kw["assert_hostname"] = pool_kw["server_hostname"] = host
        else:
            pool_kw.pop("assert_hostname", None)
            pool_kw.pop("server_hostname", None)
        return super().send(request, **kwargs)


class KwargsAdapter(HTTPAdapter):
    """An adapter whose pool manager carries extra TLS kwargs (R3c, R3d)."""

    def __init__(self, **tls: Any) -> None:
        self._tls = tls
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(self._tls)
        super().init_poolmanager(*args, **kwargs)


class ProxyKwargsAdapter(HTTPAdapter):
    """An adapter whose proxy managers carry extra kwargs: urllib3's settings for the TLS
    leg to an HTTPS proxy (``proxy_assert_hostname``, ``proxy_ssl_context``, ...)."""

    def __init__(self, **proxy_kwargs: Any) -> None:
        self._proxy_kwargs = proxy_kwargs
        super().__init__()

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        kwargs.update(self._proxy_kwargs)
        return super().proxy_manager_for(proxy, **kwargs)
