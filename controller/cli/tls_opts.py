"""The TLS options of every command that serves HTTP (run, agent): certificate files."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.env_options import Group, option
from controller.runtime.http_server import TlsFiles


def add_tls_options(group: Group, *, client_ca: bool) -> None:
    option(
        group,
        "--tls-cert-file",
        env="TLS_CERT_FILE",
        type=Path,
        metavar="FILE",
        help="serve only TLS with this certificate chain (PEM), e.g. a Docker secret",
    )
    option(
        group,
        "--tls-key-file",
        env="TLS_KEY_FILE",
        type=Path,
        metavar="FILE",
        help="the certificate's private key (PEM)",
    )
    if client_ca:
        option(
            group,
            "--tls-client-ca-file",
            env="TLS_CLIENT_CA_FILE",
            type=Path,
            metavar="FILE",
            help="require client certificates signed by this CA (PEM)",
        )


def tls_files(args: argparse.Namespace) -> TlsFiles | None:
    """The files asked for, all present; ValueError says what is missing."""
    cert, key = args.tls_cert_file, args.tls_key_file
    ca = getattr(args, "tls_client_ca_file", None)
    if cert is None and key is None:
        if ca is not None:
            raise ValueError("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
        return None
    if cert is None or key is None:
        raise ValueError("TLS needs both --tls-cert-file and --tls-key-file")
    for what, path in (("certificate", cert), ("key", key), ("client CA", ca)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"the TLS {what} file {path} does not exist")
    return TlsFiles(Path(cert), Path(key), Path(ca) if ca is not None else None)
