"""The HTTP server with TLS, and with client certificates: real sockets, real handshakes."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from controller.cli import healthcheck as probe
from controller.runtime.endpoints import Health, probe_routes
from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer, TlsFiles
from controller.runtime.metrics import Metrics
from controller.runtime.policy_source import PolicySource
from tests.runtime.serving import serving


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _files(ca: trustme.CA, where: Path, *, client_ca: bool) -> TlsFiles:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(where / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(where / "cert.pem"))
    if client_ca:
        ca.cert_pem.write_to_path(str(where / "ca.pem"))
    return TlsFiles(where / "cert.pem", where / "key.pem", where / "ca.pem" if client_ca else None)


def _app() -> object:
    health = Health(started=0.0, loop_beat=0.0)
    return make_app(
        probe_routes(health, Metrics(PolicySource(None), lease=None), clock=lambda: 0.0)
    )


@pytest.fixture
def tls_server(ca: trustme.CA, tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer([("127.0.0.1", 0)], _app(), tls=_files(ca, tmp_path, client_ca=False))  # type: ignore[arg-type]
    with serving(server):
        yield server


def _get(conn: http.client.HTTPConnection, path: str = "/healthz") -> tuple[int, dict[str, object]]:
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def test_with_tls_https_is_answered_and_plain_http_is_refused(
    ca: trustme.CA, tls_server: HttpServer
) -> None:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    secure = http.client.HTTPSConnection("127.0.0.1", tls_server.port, context=context, timeout=5)
    assert _get(secure) == (200, {"ok": True, "status": "ok"})
    plain = http.client.HTTPConnection("127.0.0.1", tls_server.port, timeout=5)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        _get(plain)


def test_with_a_client_ca_a_client_without_a_certificate_is_refused(
    ca: trustme.CA, tmp_path: Path
) -> None:
    server = HttpServer([("127.0.0.1", 0)], _app(), tls=_files(ca, tmp_path, client_ca=True))  # type: ignore[arg-type]
    with serving(server):
        anonymous = ssl.create_default_context()
        ca.configure_trust(anonymous)
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=anonymous, timeout=5)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _get(conn)

        known = ssl.create_default_context()
        ca.configure_trust(known)
        ca.issue_cert("monitor.example").configure_cert(known)
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=known, timeout=5)
        assert _get(conn)[0] == 200

        stranger = ssl.create_default_context()
        ca.configure_trust(stranger)
        trustme.CA().issue_cert("monitor.example").configure_cert(stranger)
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=stranger, timeout=5)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _get(conn)


def test_a_key_that_does_not_match_fails_the_start(ca: trustme.CA, tmp_path: Path) -> None:
    files = _files(ca, tmp_path, client_ca=False)
    ca.issue_cert("other").private_key_pem.write_to_path(str(files.key))
    with pytest.raises(ssl.SSLError):
        HttpServer([("127.0.0.1", 0)], _app(), tls=files)  # type: ignore[arg-type]


def test_one_server_answers_on_every_address_it_is_given() -> None:
    server = HttpServer([("127.0.0.1", 0), ("127.0.0.1", 0)], _app())  # type: ignore[arg-type]
    with serving(server):
        assert len(set(server.ports)) == 2
        for port in server.ports:
            assert _get(http.client.HTTPConnection("127.0.0.1", port, timeout=5))[0] == 200


@pytest.mark.parametrize("mutual", [False, True])
def test_the_container_probe_speaks_tls_when_the_server_does(
    ca: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutual: bool
) -> None:
    files = _files(ca, tmp_path, client_ca=mutual)
    server = HttpServer([("127.0.0.1", 0)], _app(), tls=files)  # type: ignore[arg-type]
    with serving(server):
        address = f"127.0.0.1:{server.port}"
        monkeypatch.delenv("PLACEMENT_TLS_CERT_FILE", raising=False)
        assert probe.main(["healthz", address]) == 1  # plain HTTP gets no answer
        monkeypatch.setenv("PLACEMENT_TLS_CERT_FILE", str(files.cert))
        monkeypatch.setenv("PLACEMENT_TLS_KEY_FILE", str(files.key))
        if mutual:
            monkeypatch.setenv("PLACEMENT_TLS_CLIENT_CA_FILE", str(files.client_ca))
        assert probe.main(["healthz", address]) == 0


def _handshake(port: int, ca: trustme.CA, ciphers: str) -> str:
    """The cipher a TLS 1.2 client offering only `ciphers` gets, or the refusal."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(client)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    client.set_ciphers(ciphers)
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=client)
        conn.connect()
    except ssl.SSLError as exc:
        return f"refused: {exc.reason}"
    cipher = conn.sock.cipher()  # type: ignore[union-attr]
    conn.close()
    return str(cipher[0])


def test_tls_offers_only_key_exchanges_with_forward_secrecy(tmp_path: Path) -> None:
    """With an RSA key, OpenSSL's defaults would also take RSA key transport, where a key
    that leaks later opens every recorded session."""
    rsa = trustme.CA(key_type=trustme.KeyType.RSA)
    cert = rsa.issue_cert("127.0.0.1", key_type=trustme.KeyType.RSA)
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    files = TlsFiles(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = HttpServer([("127.0.0.1", 0)], _app(), tls=files)  # type: ignore[arg-type]
    with serving(server):
        assert _handshake(server.port, rsa, "AES128-GCM-SHA256").startswith("refused")
        assert _handshake(server.port, rsa, "AES256-SHA").startswith("refused")
        assert _handshake(server.port, rsa, "ECDHE-RSA-AES128-GCM-SHA256") == (
            "ECDHE-RSA-AES128-GCM-SHA256"
        )
