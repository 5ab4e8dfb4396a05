"""The lab API server's certificates (a CA it makes once, a server certificate for 127.0.0.1) and the
kubeconfig it writes for clients."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..core import write_private


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def ensure_pki(data_dir: Path, host: str = "127.0.0.1") -> tuple[Path, Path, Path]:
    """ca.crt, server.crt, server.key under ``data_dir/pki`` (made once; the server cert is remade when it
    does not name ``host`` or expires within a day)."""
    pki = data_dir / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    ca_crt, ca_key = pki / "ca.crt", pki / "ca.key"
    server_crt, server_key = pki / "server.crt", pki / "server.key"
    now = datetime.datetime.now(datetime.timezone.utc)
    if not (ca_crt.exists() and ca_key.exists()):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "deployopen-lab-kubernetes-ca")])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=3650))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        write_private(ca_key, _key_pem(key))
        ca_crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        server_crt.unlink(missing_ok=True)
    ca_cert = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    ca_private = serialization.load_pem_private_key(ca_key.read_bytes(), None)
    if server_crt.exists() and server_key.exists():
        current = x509.load_pem_x509_certificate(server_crt.read_bytes())
        sans = current.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        if (ipaddress.ip_address(host) in sans.get_values_for_type(x509.IPAddress)
                and current.not_valid_after_utc > now + datetime.timedelta(days=1)):
            return ca_crt, server_crt, server_key
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=825))
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost"), x509.DNSName("kubernetes"),
                x509.DNSName("kubernetes.default"), x509.DNSName("kubernetes.default.svc")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
                           critical=False)
            .sign(ca_private, hashes.SHA256()))  # type: ignore[arg-type]
    write_private(server_key, _key_pem(key))
    server_crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return ca_crt, server_crt, server_key


def ensure_token(data_dir: Path) -> str:
    """The admin bearer token (made once, kept mode 0600)."""
    path = data_dir / "token"
    if not path.exists():
        write_private(path, secrets.token_urlsafe(32).encode())
    return path.read_text().strip()


def kubeconfig(server: str, ca_crt: Path, token: str, context: str = "lab") -> str:
    """A kubeconfig (JSON is valid YAML, and kubectl and the Python client read it)."""
    config = {
        "apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": context,
        "clusters": [{"name": context, "cluster": {
            "server": server, "certificate-authority-data": base64.b64encode(ca_crt.read_bytes()).decode()}}],
        "users": [{"name": f"{context}-admin", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin",
                                                   "namespace": "default"}}],
    }
    return json.dumps(config, indent=2) + "\n"


def write_kubeconfig(path: Path, server: str, ca_crt: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, kubeconfig(server, ca_crt, token).encode())
