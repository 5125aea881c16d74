"""TLS for the broker's SSL listeners: a server ``ssl.SSLContext`` from Kafka's ``ssl.*`` settings
(PEM only), and a client certificate's principal by Kafka's DEFAULT rule.

* TLS 1.2 and 1.3 only (``ssl.enabled.protocols`` may narrow it to one of them).
* The key store: ``ssl.keystore.location`` (one PEM file with the certificate chain and the private
  key, as Kafka's PEM key store), or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` as
  PEM text; ``ssl.key.password`` for an encrypted key.
* ``ssl.client.auth``: ``required`` refuses a handshake without a certificate that chains to the
  trust store (``ssl.truststore.location`` or ``ssl.truststore.certificates``); ``requested`` asks
  and accepts none; ``none`` does not ask.
* The principal of a client with a certificate is ``User:<subject DN>`` in RFC 2253 form, as
  Kafka's DefaultKafkaPrincipalBuilder with ``ssl.principal.mapping.rules=DEFAULT`` builds it
  from ``X500Principal.getName()``: RDNs from the last to the first, ``CN=alice,OU=eng,O=Acme``.
  Without a certificate: ``User:ANONYMOUS``.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from ..config.settings import SslConfig

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(config: SslConfig) -> ssl.SSLContext:
    """A server context for one listener; raises ssl.SSLError / OSError / ValueError naming
    what could not be loaded."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in config.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if config.keystore_location:
        context.load_cert_chain(config.keystore_location, password=config.key_password)
    else:
        # load_cert_chain reads files only: the PEM text goes through a private temporary file
        # (mode 0600 in a 0700 directory), removed at once.
        with tempfile.TemporaryDirectory(prefix="oncelog-tls-") as d:
            path = os.path.join(d, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(config.keystore_certificate_chain.strip() + "\n" + config.keystore_key.strip() + "\n")
            context.load_cert_chain(path, password=config.key_password)
    context.verify_mode = _VERIFY[config.client_auth]
    if config.truststore_location:
        context.load_verify_locations(cafile=config.truststore_location)
    elif config.truststore_certificates:
        context.load_verify_locations(cadata=config.truststore_certificates)
    return context


# How Java's X500Principal.getName() (RFC 2253) names the attributes Python's ssl reports;
# others keep Python's name.
_KEYWORDS = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}


def _escape(value: str) -> str:
    """RFC 2253 section 2.4: escape , + " \\ < > ; and a leading # or space, a trailing space."""
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def subject_dn(cert: dict) -> str:
    """The RFC 2253 form of a peer certificate's subject (``ssl.SSLObject.getpeercert()``)."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)
