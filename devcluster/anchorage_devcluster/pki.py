"""The control plane's certificates: one CA, the API server's serving certificate, client certificates.

Used by ``controlplane`` when it starts a cluster: every component authenticates as a real cluster's
does — the admin with a ``system:masters`` client certificate, the controller manager and the scheduler
as ``system:kube-controller-manager`` / ``system:kube-scheduler``, each node agent as
``system:node:<name>`` in ``system:nodes`` (so the Node authorizer and NodeRestriction apply to it) — and
ServiceAccount tokens are signed with :func:`service_account_keys`. Keys are EC P-256, valid for a year.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = dt.timedelta(days=365)


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, PEM-encoded, and where they were written."""

    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
    pair = Pair(folder / f"{stem}.crt", folder / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pair.key.write_bytes(_pem_key(key))
    pair.key.chmod(0o600)
    return pair


class Authority:
    """A self-signed CA that issues the cluster's certificates into ``folder``."""

    def __init__(self, folder: Path, name: str = "anchorage-devcluster-ca") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + _VALID)
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.pair = _write(folder, "ca", self._cert, self._key)

    def issue(self, stem: str, common_name: str, *, groups: tuple[str, ...] = (), hosts: tuple[str, ...] = (),
              server: bool = False) -> Pair:
        """A certificate for ``common_name`` (organisations = ``groups``); ``hosts`` become SANs of a server cert."""
        key = _key()
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject = x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = dt.datetime.now(dt.UTC)
        usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + _VALID)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usage), critical=False))
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return _write(self.folder, stem, builder.sign(self._key, hashes.SHA256()), key)


def service_account_keys(folder: Path) -> Pair:
    """The key pair the API server signs ServiceAccount tokens with (``cert`` holds the public key)."""
    key = _key()
    pair = Pair(folder / "sa.pub", folder / "sa.key")
    pair.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo))
    pair.key.write_bytes(_pem_key(key))
    pair.key.chmod(0o600)
    return pair
