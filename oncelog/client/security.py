"""TLS and SASL for the connector's Kafka clients, configured with Kafka's client config names.

One reading of the user's ``kafka.*`` settings (prefix removed) serves both clients the connector
uses: :func:`resolve` turns Java client names (what Spark users write) and confluent-kafka's
names (what Python users write) into one :class:`Security`; the protocol client
(:mod:`oncelog.client.kafka`) builds its TLS context and SASL exchange from it, and
:func:`librdkafka_config` translates it for every confluent-kafka client the connector builds.

Supported:

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
- TLS 1.2+ with the standard library's :mod:`ssl`. Trust: ``ssl.truststore.location`` (a PEM
  file, ``ssl.truststore.type=PEM`` as KIP-651), ``ssl.truststore.certificates`` (inline PEM), or
  confluent-kafka's ``ssl.ca.location`` / ``ssl.ca.pem``; none of them: the system's CAs.
  Client certificate (mTLS): ``ssl.keystore.location`` (PEM file with the private key and the
  certificate chain, KIP-651), ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (inline
  PEM), or ``ssl.certificate.location`` + ``ssl.key.location`` / ``ssl.certificate.pem`` +
  ``ssl.key.pem``; ``ssl.key.password`` for an encrypted key. ``ssl.endpoint.identification.algorithm``
  ``https`` (the default: the certificate must name the host the client connects to) or empty
  (``none``) to skip the name check; confluent-kafka's ``enable.ssl.certificate.verification=false``
  skips verification altogether. ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3) and
  ``ssl.cipher.suites`` (OpenSSL names) narrow what is offered.
- SASL (SaslHandshake v1 + SaslAuthenticate v1/v2) with ``sasl.mechanism`` (or confluent-kafka's
  ``sasl.mechanisms``): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (RFC 5802 through ``scramp``) and
  OAUTHBEARER (RFC 7628). Credentials: ``sasl.jaas.config`` as Kafka parses it (one login module,
  ``username=... password=...``; shaded module names such as ``kafkashaded.org.apache...`` work),
  or ``sasl.username`` / ``sasl.password``. OAUTHBEARER tokens, first match wins:
  ``sasl.oauthbearer.token`` (ours: a static token), ``sasl.oauthbearer.token.file`` (ours: a file
  holding the token, read again at every connection so an external refresher can rotate it),
  ``sasl.oauthbearer.token.endpoint.url=file:///path`` (Kafka's name for a token file), or Kafka's
  unsecured development tokens (``OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="u";``).

Refused at start, with the reason: other mechanisms (GSSAPI/Kerberos), JKS and PKCS12 stores
(convert them to PEM), Java callback handler classes, OAuth token endpoints over HTTP, TLS
below 1.2, and two names given different values for one setting.

Failures at connect time raise :class:`KafkaSecurityError` subclasses, which are not
``OSError``: callers' retry loops (meant for brokers restarting) let them through at once, so
wrong credentials or an untrusted certificate end the query at start instead of retrying.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..security.jaas import JaasConfigError, JaasEntry, parse_jaas_entries

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# Our own names (no Kafka client has a static-token setting): documented in the module docstring.
OAUTH_TOKEN = "sasl.oauthbearer.token"
OAUTH_TOKEN_FILE = "sasl.oauthbearer.token.file"

# Login modules of sasl.jaas.config (matched by suffix: vendors shade the package).
_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAUTHBEARER",
    "com.sun.security.auth.module.Krb5LoginModule": "GSSAPI",
}


class KafkaSecurityError(Exception):
    """TLS or SASL failed or is misconfigured. Deliberately not an ``OSError``: retrying the
    same credentials or the same certificate cannot succeed, so retry loops must not catch it."""


class SecurityConfigError(KafkaSecurityError, ValueError):
    """The security settings are contradictory, incomplete or unsupported."""


class SslAuthenticationError(KafkaSecurityError):
    """The TLS handshake failed: untrusted certificate, hostname mismatch, client certificate refused."""


class SaslAuthenticationError(KafkaSecurityError):
    """SASL authentication failed; ``code`` is the broker's error code (e.g. SASL_AUTHENTICATION_FAILED)."""

    def __init__(self, message: str, code=None) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------
# sasl.jaas.config


def parse_jaas_config(text: str) -> JaasEntry:
    """``sasl.jaas.config`` as Kafka parses it (:mod:`oncelog.security.jaas`): exactly one
    login module, as Kafka's clients require."""
    try:
        entries = parse_jaas_entries(text)
    except JaasConfigError as exc:
        raise SecurityConfigError(f"sasl.jaas.config: {exc}") from None
    if len(entries) != 1:
        raise SecurityConfigError(f"sasl.jaas.config holds {len(entries)} login modules; a Kafka client needs exactly 1")
    return entries[0]


def _module_kind(module: str) -> str | None:
    for name, kind in _LOGIN_MODULES.items():
        if module == name or module.endswith("." + name):
            return kind
    return None


# ---------------------------------------------------------------------------------------------
# Resolution of the settings


@dataclass
class Security:
    """The security settings of one client, whatever names they were given under."""

    protocol: str = "PLAINTEXT"
    # TLS
    ca_file: str | None = None
    ca_pem: str | None = None
    cert_file: str | None = None
    key_file: str | None = None  # None with cert_file: the key is in cert_file (a KIP-651 keystore)
    cert_pem: str | None = None
    key_pem: str | None = None
    key_password: str | None = None
    verify: bool = True
    check_hostname: bool = True
    tls_versions: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    ciphers: str | None = None
    # SASL
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    oauth_token: str | None = None
    oauth_token_file: str | None = None
    oauth_unsecured: dict[str, str] | None = None  # the jaas options of Kafka's unsecured login
    oauth_extensions: dict[str, str] = field(default_factory=dict)
    _context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __repr__(self) -> str:  # never print secrets
        shown = {k: v for k, v in self.__dict__.items() if v not in (None, {}) and not k.startswith("_")}
        for k in ("password", "key_password", "key_pem", "oauth_token"):
            if k in shown:
                shown[k] = "***"
        if self.oauth_unsecured:
            shown["oauth_unsecured"] = "{...}"
        return f"Security({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    # -- TLS --------------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """The client TLS context (built once): TLS 1.2+, the configured trust and client certificate."""
        if self._context is None:
            self._context = _build_context(self)
        return self._context

    # -- OAUTHBEARER ------------------------------------------------------------------------------

    def oauth_bearer_token(self) -> str:
        """The token to present now (a token file is read again at every call)."""
        if self.oauth_token:
            return self.oauth_token.strip()
        if self.oauth_token_file:
            try:
                with open(self.oauth_token_file) as f:
                    token = f.read().strip()
            except OSError as exc:
                raise SecurityConfigError(f"cannot read the OAUTHBEARER token file {self.oauth_token_file}: {exc}") from exc
            if not token:
                raise SecurityConfigError(f"the OAUTHBEARER token file {self.oauth_token_file} is empty")
            return token
        if self.oauth_unsecured is not None:
            return unsecured_jws(self.oauth_unsecured)
        raise SecurityConfigError("sasl.mechanism=OAUTHBEARER needs a token: set sasl.oauthbearer.token, "
                                  "sasl.oauthbearer.token.file, sasl.oauthbearer.token.endpoint.url=file:///path, "
                                  "or Kafka's unsecured login options in sasl.jaas.config")


def _truthy(value: str) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def _read_pem_file(name: str, path: str) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError as exc:
        raise SecurityConfigError(f"{name}={path}: {exc.strerror or exc}") from exc
    if b"-----BEGIN" not in head:
        raise SecurityConfigError(f"{name}={path} is not a PEM file: only PEM stores are supported (KIP-651, "
                                  "type=PEM); convert a JKS or PKCS12 store with keytool -importkeystore and "
                                  "openssl pkcs12 -nodes")
    return path


def normalize_pem(text: str) -> str:
    """PEM blocks re-wrapped the way OpenSSL reads them: users pass inline PEM through Spark
    options with newlines turned into spaces, or none at all."""
    blocks = re.findall(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", text or "", re.S)
    if not blocks:
        raise SecurityConfigError("inline PEM holds no '-----BEGIN ...-----' block")
    out = []
    for label, body in blocks:
        headers = ""
        if ":" in body:  # encrypted traditional keys carry 'Proc-Type:'/'DEK-Info:' headers
            lines = [ln.strip() for ln in body.strip().splitlines()]
            head = [ln for ln in lines if ":" in ln]
            body = "".join(ln for ln in lines if ":" not in ln)
            headers = "\n".join(head) + "\n\n"
        b64 = re.sub(r"\s+", "", body)
        wrapped = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        out.append(f"-----BEGIN {label}-----\n{headers}{wrapped}\n-----END {label}-----\n")
    return "".join(out)


def _one(config: Mapping[str, str], *names: str) -> tuple[str | None, str | None]:
    """(value, name) of the one setting given under any of ``names``; two different values refused."""
    found = [(n, config[n]) for n in names if config.get(n) not in (None, "")]
    if not found:
        return None, None
    if len({v for _, v in found}) > 1:
        raise SecurityConfigError(f"{' and '.join(n for n, _ in found)} are both set, to different values: set one")
    return found[0][1], found[0][0]


def resolve(config: Mapping[str, str]) -> Security:
    """The :class:`Security` of a client config (Kafka's names without the ``kafka.`` prefix).
    Raises :class:`SecurityConfigError` for anything contradictory or unsupported, naming it."""
    cfg = {k.lower(): ("" if v is None else str(v)) for k, v in (config or {}).items()}
    sec = Security()
    protocol = (cfg.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    sec.protocol = protocol

    for name in ("sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "ssl.engine.factory.class"):
        if cfg.get(name):
            raise SecurityConfigError(f"{name} names a Java class, which a Python client cannot run: use the "
                                      "settings of oncelog.client.security instead")

    if sec.tls:
        _resolve_tls(cfg, sec)
    if sec.sasl:
        _resolve_sasl(cfg, sec)
    return sec


def _resolve_tls(cfg: dict[str, str], sec: Security) -> None:
    for kind in ("truststore", "keystore"):
        store_type = (cfg.get(f"ssl.{kind}.type") or "").strip().upper()
        if store_type and store_type != "PEM":
            raise SecurityConfigError(f"ssl.{kind}.type={store_type} is not supported: only PEM (KIP-651); "
                                      "convert the store to PEM (keytool -importkeystore to PKCS12, then "
                                      "openssl pkcs12 -nodes)")
    if cfg.get("ssl.truststore.password"):
        # As Kafka's DefaultSslEngineFactory: a PEM trust store has no password.
        raise SecurityConfigError("ssl.truststore.password cannot be set for a PEM trust store")
    if cfg.get("ssl.keystore.password"):
        raise SecurityConfigError("ssl.keystore.password cannot be set for a PEM key store; an encrypted "
                                  "private key takes ssl.key.password")
    if cfg.get("ssl.keystore.location") and (cfg.get("ssl.keystore.key") or cfg.get("ssl.keystore.certificate.chain")):
        raise SecurityConfigError("set either ssl.keystore.location or ssl.keystore.key + ssl.keystore.certificate.chain")

    ca_file, name = _one(cfg, "ssl.truststore.location", "ssl.ca.location")
    if ca_file:
        sec.ca_file = _read_pem_file(name, ca_file)
    ca_pem, _ = _one(cfg, "ssl.truststore.certificates", "ssl.ca.pem")
    if ca_pem:
        sec.ca_pem = normalize_pem(ca_pem)
    if sec.ca_file and sec.ca_pem:
        raise SecurityConfigError("set either a trust store file (ssl.truststore.location / ssl.ca.location) or inline "
                                  "certificates (ssl.truststore.certificates / ssl.ca.pem), not both")

    keystore = cfg.get("ssl.keystore.location")
    if keystore:
        if cfg.get("ssl.certificate.location") or cfg.get("ssl.key.location"):
            raise SecurityConfigError("set either ssl.keystore.location or ssl.certificate.location + ssl.key.location")
        sec.cert_file = _read_pem_file("ssl.keystore.location", keystore)
    elif cfg.get("ssl.certificate.location") or cfg.get("ssl.key.location"):
        if not (cfg.get("ssl.certificate.location") and cfg.get("ssl.key.location")):
            raise SecurityConfigError("ssl.certificate.location and ssl.key.location go together")
        sec.cert_file = _read_pem_file("ssl.certificate.location", cfg["ssl.certificate.location"])
        sec.key_file = _read_pem_file("ssl.key.location", cfg["ssl.key.location"])
    cert_pem, _ = _one(cfg, "ssl.keystore.certificate.chain", "ssl.certificate.pem")
    key_pem, _ = _one(cfg, "ssl.keystore.key", "ssl.key.pem")
    if cert_pem or key_pem:
        if not (cert_pem and key_pem):
            raise SecurityConfigError("an inline client certificate needs both its chain (ssl.keystore.certificate.chain "
                                      "/ ssl.certificate.pem) and its key (ssl.keystore.key / ssl.key.pem)")
        if sec.cert_file:
            raise SecurityConfigError("set the client certificate either as files or inline, not both")
        sec.cert_pem, sec.key_pem = normalize_pem(cert_pem), normalize_pem(key_pem)
    sec.key_password = cfg.get("ssl.key.password") or None

    algorithm = cfg.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm in ("", "none"):
        sec.check_hostname = False
    elif algorithm != "https":
        raise SecurityConfigError(f"ssl.endpoint.identification.algorithm={algorithm!r}: use https (check the host "
                                  "name, the default) or an empty value (do not)")
    if "enable.ssl.certificate.verification" in cfg and not _truthy(cfg["enable.ssl.certificate.verification"]):
        sec.verify = False
        sec.check_hostname = False

    protocols = cfg.get("ssl.enabled.protocols") or ""
    if protocols.strip():
        wanted = tuple(p.strip() for p in protocols.split(",") if p.strip())
        bad = [p for p in wanted if p not in ("TLSv1.2", "TLSv1.3")]
        if bad:
            raise SecurityConfigError(f"ssl.enabled.protocols={protocols}: only TLSv1.2 and TLSv1.3 are supported")
        sec.tls_versions = tuple(sorted(set(wanted)))
    ssl_protocol = (cfg.get("ssl.protocol") or "").strip()
    if ssl_protocol and ssl_protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise SecurityConfigError(f"ssl.protocol={ssl_protocol}: only TLS 1.2 and later are supported")
    ciphers = cfg.get("ssl.cipher.suites") or ""
    sec.ciphers = ciphers.strip() or None
    _build_context(sec)  # files that do not load fail now, at start


def _resolve_sasl(cfg: dict[str, str], sec: Security) -> None:
    mechanism, _ = _one(cfg, "sasl.mechanism", "sasl.mechanisms")
    jaas = parse_jaas_config(cfg["sasl.jaas.config"]) if cfg.get("sasl.jaas.config") else None
    kind = _module_kind(jaas.login_module) if jaas else None
    if not mechanism:
        # Kafka's default, GSSAPI, is not supported: say so rather than guess SCRAM's hash.
        raise SecurityConfigError(f"security.protocol={sec.protocol} needs sasl.mechanism (one of {', '.join(MECHANISMS)}; "
                                  "Kafka's default GSSAPI/Kerberos is not supported)")
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism={mechanism} is not supported (supported: {', '.join(MECHANISMS)})")
    sec.mechanism = mechanism
    if kind == "GSSAPI":
        raise SecurityConfigError("sasl.jaas.config names Krb5LoginModule: GSSAPI/Kerberos is not supported")
    options = jaas.options if jaas else {}

    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for key, jaas_key in (("username", "username"), ("password", "password")):
            values = {v for v in (options.get(jaas_key), cfg.get(f"sasl.{key}")) if v}
            if len(values) > 1:
                raise SecurityConfigError(f"sasl.jaas.config and sasl.{key} give different {key}s: set one")
            setattr(sec, key, values.pop() if values else None)
        if not sec.username or sec.password is None:
            raise SecurityConfigError(f"sasl.mechanism={mechanism} needs a username and a password: sasl.jaas.config="
                                      f"'{_example_module(mechanism)} required username=\"...\" password=\"...\";' "
                                      "or sasl.username and sasl.password")
        return

    # OAUTHBEARER
    sec.oauth_token = cfg.get(OAUTH_TOKEN) or None
    sec.oauth_token_file = cfg.get(OAUTH_TOKEN_FILE) or None
    url = (cfg.get("sasl.oauthbearer.token.endpoint.url") or "").strip()
    if url:
        if not url.lower().startswith("file:"):
            raise SecurityConfigError(f"sasl.oauthbearer.token.endpoint.url={url}: only a file: URL (a token file) is "
                                      f"supported; fetch the token yourself and pass it as {OAUTH_TOKEN_FILE}")
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(url).path)
        if sec.oauth_token_file and sec.oauth_token_file != path:
            raise SecurityConfigError(f"sasl.oauthbearer.token.endpoint.url and {OAUTH_TOKEN_FILE} name different files")
        sec.oauth_token_file = path
    if sec.oauth_token and sec.oauth_token_file:
        raise SecurityConfigError(f"set either {OAUTH_TOKEN} or a token file, not both")
    method = (cfg.get("sasl.oauthbearer.method") or "default").strip().lower()
    if method != "default" and not (sec.oauth_token or sec.oauth_token_file):
        raise SecurityConfigError(f"sasl.oauthbearer.method={method} (librdkafka's OIDC token fetch) is not supported: "
                                  f"pass the token as {OAUTH_TOKEN} or {OAUTH_TOKEN_FILE}")
    sec.oauth_extensions = {k[len("unsecuredLoginExtension_"):]: v for k, v in options.items()
                            if k.startswith("unsecuredLoginExtension_")}
    if not (sec.oauth_token or sec.oauth_token_file):
        if any(k.startswith("unsecuredLogin") for k in options):
            sec.oauth_unsecured = dict(options)
            unsecured_jws(sec.oauth_unsecured)  # malformed claims fail now
        else:
            sec.oauth_bearer_token()  # raises: no token source
    elif sec.oauth_token_file:
        sec.oauth_bearer_token()  # a missing or empty file fails at start


def _example_module(mechanism: str) -> str:
    return ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule")


def check(config: Mapping[str, str]) -> None:
    """Raise :class:`SecurityConfigError` now if ``config``'s security settings cannot work
    (for option validation before any connection)."""
    resolve(config)


# ---------------------------------------------------------------------------------------------
# TLS


def _build_context(sec: Security) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3 if sec.tls_versions == ("TLSv1.3",) else ssl.TLSVersion.TLSv1_2
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2 if sec.tls_versions == ("TLSv1.2",) else ssl.TLSVersion.MAXIMUM_SUPPORTED
    if sec.ciphers:
        try:
            ctx.set_ciphers(sec.ciphers)
        except ssl.SSLError as exc:
            raise SecurityConfigError(f"ssl.cipher.suites={sec.ciphers!r} selects no cipher OpenSSL knows (use OpenSSL "
                                      f"names, e.g. ECDHE-RSA-AES256-GCM-SHA384): {exc}") from exc
    ctx.check_hostname = sec.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED if sec.verify else ssl.CERT_NONE
    try:
        if sec.ca_file:
            ctx.load_verify_locations(cafile=sec.ca_file)
        elif sec.ca_pem:
            ctx.load_verify_locations(cadata=sec.ca_pem)
        elif sec.verify:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except ssl.SSLError as exc:
        raise SecurityConfigError(f"the trusted certificates ({sec.ca_file or 'inline PEM'}) do not load: {exc}") from exc
    password = sec.key_password
    try:
        if sec.cert_file:
            ctx.load_cert_chain(sec.cert_file, sec.key_file, password=password)
        elif sec.cert_pem:
            _load_inline_chain(ctx, sec.cert_pem, sec.key_pem, password)
    except ssl.SSLError as exc:
        where = sec.cert_file or "inline PEM"
        hint = " (wrong or missing ssl.key.password?)" if "PEM" in str(exc) or "password" in str(exc).lower() else ""
        raise SecurityConfigError(f"the client certificate and key ({where}) do not load{hint}: {exc}") from exc
    return ctx


def _load_inline_chain(ctx: ssl.SSLContext, cert_pem: str, key_pem: str, password: str | None) -> None:
    # ssl loads certificates and keys from files only: a private file, removed once read.
    fd, path = tempfile.mkstemp(prefix="oncelog-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key_pem + cert_pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def describe_ssl_error(exc: ssl.SSLError, address: str, sec: Security) -> str:
    """What went wrong in a TLS handshake with ``address``, in the user's terms."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        message = exc.verify_message or exc.reason or str(exc)
        if exc.verify_code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
            return (f"TLS hostname mismatch: the certificate of broker {address} does not name the host the client "
                    f"connected to ({message}); connect by a name the certificate holds, or set "
                    "ssl.endpoint.identification.algorithm= (empty) to skip the name check")
        trust = sec.ca_file or ("inline certificates" if sec.ca_pem else "the system's CAs")
        return (f"TLS: the certificate of broker {address} is not trusted ({message}); trusted: {trust} "
                "(ssl.truststore.location / ssl.ca.location)")
    reason = (exc.reason or str(exc)).upper()
    if "CERTIFICATE_REQUIRED" in reason or ("BAD_CERTIFICATE" in reason and not (sec.cert_file or sec.cert_pem)):
        return (f"TLS: broker {address} requires a client certificate ({exc.reason}); set ssl.keystore.location "
                "(or ssl.certificate.location + ssl.key.location)")
    if "UNKNOWN_CA" in reason or "BAD_CERTIFICATE" in reason or "CERTIFICATE_UNKNOWN" in reason:
        return f"TLS: broker {address} refused the client certificate ({exc.reason})"
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER_FAILURE" in reason or "PACKET_LENGTH_TOO_LONG" in reason:
        return (f"TLS handshake with {address} failed ({exc.reason}): the listener does not speak TLS; "
                "is it PLAINTEXT or SASL_PLAINTEXT?")
    return f"TLS handshake with {address} failed: {exc}"


def looks_like_tls(head: bytes) -> bool:
    """A TLS record header (handshake or alert, TLS 1.0-1.3) where a Kafka response's size should be:
    a plaintext client talking to a TLS listener."""
    return len(head) >= 3 and head[0] in (0x15, 0x16) and head[1] == 3 and head[2] <= 4


# ---------------------------------------------------------------------------------------------
# SASL


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jws(options: Mapping[str, str], now: float | None = None) -> str:
    """An unsigned token (``alg: none``) as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes
    it from the jaas options ``unsecuredLoginStringClaim_<n>``, ``unsecuredLoginNumberClaim_<n>``,
    ``unsecuredLoginListClaim_<n>`` (first character: the separator), ``unsecuredLoginPrincipalClaimName``
    (default ``sub``), ``unsecuredLoginLifetimeSeconds`` (default 3600). For development clusters
    whose brokers use Kafka's unsecured validator."""
    now = time.time() if now is None else now
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    try:
        lifetime = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    except ValueError:
        raise SecurityConfigError("unsecuredLoginLifetimeSeconds is not an integer") from None
    claims: dict[str, object] = {"iat": int(now), "exp": int(now) + lifetime}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key[len("unsecuredLoginStringClaim_"):]] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            try:
                claims[key[len("unsecuredLoginNumberClaim_"):]] = float(value) if "." in value else int(value)
            except ValueError:
                raise SecurityConfigError(f"{key}={value!r} is not a number") from None
        elif key.startswith("unsecuredLoginListClaim_"):
            claims[key[len("unsecuredLoginListClaim_"):]] = [v for v in value[1:].split(value[0])] if value else []
    if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim]:
        raise SecurityConfigError(f"Kafka's unsecured OAUTHBEARER login needs unsecuredLoginStringClaim_{principal_claim}")
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    return f"{header}.{_b64url(json.dumps(claims, separators=(',', ':')).encode())}."


def token_claims(token: str) -> dict:
    """The claims of a JWT (unverified: for its expiry and subject only); {} if it is not one."""
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}


def oauth_client_first(token: str, extensions: Mapping[str, str]) -> bytes:
    """RFC 7628's client initial response: ``n,,\\x01auth=Bearer <token>\\x01[k=v\\x01]*\\x01``."""
    ext = "".join(f"{k}={v}\x01" for k, v in sorted(extensions.items()))
    return f"n,,\x01auth=Bearer {token}\x01{ext}\x01".encode()


def authenticate(conn, sec: Security, modules: Callable) -> float | None:
    """SASL on a connection that has negotiated ApiVersions: SaslHandshake v1, then the
    mechanism's exchange in SaslAuthenticate requests. ``conn.request`` sends one request and
    returns its response; ``modules(api_key, version)`` gives kio's request module. Returns the
    session lifetime in seconds the broker granted (None: unlimited; KIP-368), after which
    the connection must be replaced. Raises SaslAuthenticationError with the broker's message."""
    from kio.schema.errors import ErrorCode

    address = conn.address
    if 17 not in conn.api_versions or 36 not in conn.api_versions:
        raise SaslAuthenticationError(f"broker {address} does not offer SaslHandshake/SaslAuthenticate: it cannot do "
                                      f"SASL (is its listener PLAINTEXT or SSL? security.protocol={sec.protocol})")
    hs = modules(17, 1).SaslHandshakeRequest(mechanism=sec.mechanism)
    resp = conn.request(hs)
    if resp.error_code == ErrorCode.unsupported_sasl_mechanism:
        raise SaslAuthenticationError(f"broker {address} does not enable SASL mechanism {sec.mechanism}; its listener "
                                      f"enables {', '.join(resp.mechanisms) or 'none'} (sasl.mechanism)", resp.error_code)
    if resp.error_code == ErrorCode.illegal_sasl_state:
        raise SaslAuthenticationError(f"broker {address} does not expect SASL on this listener (is it PLAINTEXT or SSL? "
                                      f"security.protocol={sec.protocol})", resp.error_code)
    if resp.error_code != ErrorCode.none:
        raise SaslAuthenticationError(f"SaslHandshake with {address}: {resp.error_code.name.upper()}", resp.error_code)
    lo, hi = conn.api_versions[36]
    version = min(hi, 2)
    if version < lo:
        raise SaslAuthenticationError(f"broker {address} offers SaslAuthenticate v{lo}-{hi}; this client sends v0-v2")
    m = modules(36, version)
    lifetime: list[float | None] = [None]

    def step(data: bytes, expect_error: bool = False) -> bytes:
        r = conn.request(m.SaslAuthenticateRequest(auth_bytes=data))
        if r.error_code != ErrorCode.none:
            detail = r.error_message or "no message"
            raise SaslAuthenticationError(
                f"SASL {sec.mechanism} authentication of {describe_principal(sec)} with broker {address} failed: "
                f"{r.error_code.name.upper()} ({int(r.error_code)}): {detail}", r.error_code)
        ms = _lifetime_ms(getattr(r, "session_lifetime", None))
        if ms:
            lifetime[0] = ms / 1000
        return r.auth_bytes or b""

    mech = sec.mechanism
    if mech == "PLAIN":
        step(f"\0{sec.username}\0{sec.password}".encode())
    elif mech.startswith("SCRAM-"):
        import scramp

        try:
            client = scramp.ScramClient([mech], sec.username, sec.password)
            server_first = step(client.get_client_first().encode())
            client.set_server_first(server_first.decode())
            server_final = step(client.get_client_final().encode())
            client.set_server_final(server_final.decode())
        except scramp.ScramException as exc:
            raise SaslAuthenticationError(f"SASL {mech} with broker {address} failed: {exc}") from exc
    else:  # OAUTHBEARER
        token = sec.oauth_bearer_token()
        challenge = step(oauth_client_first(token, sec.oauth_extensions))
        if challenge:
            # RFC 7628 3.2.2: the server's error (a JSON document) comes as a challenge; the
            # client answers a single 0x01 and the server then fails the exchange with its message.
            try:
                step(b"\x01")
            except SaslAuthenticationError as exc:
                said = challenge.decode(errors="replace")
                raise SaslAuthenticationError(str(exc) if said in str(exc) else f"{exc} (server said: {said})",
                                              exc.code) from None
            raise SaslAuthenticationError(f"OAUTHBEARER with broker {address}: the broker sent "
                                          f"{challenge.decode(errors='replace')} and did not fail the exchange")
    return lifetime[0]


def _lifetime_ms(value) -> int:
    if value is None:
        return 0
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)


def describe_principal(sec: Security) -> str:
    if sec.username:
        return repr(sec.username)
    if sec.mechanism == "OAUTHBEARER":
        return "the OAUTHBEARER token"
    return "the client"


# ---------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)


# Kafka's Java client names that have no librdkafka counterpart once translated: dropped.
_JAVA_ONLY = {
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates", "ssl.keystore.location",
    "ssl.keystore.type", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.enabled.protocols",
    "ssl.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.oauthbearer.token.endpoint.url",
    OAUTH_TOKEN, OAUTH_TOKEN_FILE,
}


def librdkafka_config(config: Mapping[str, str], bootstrap: str | None = None) -> dict:
    """confluent-kafka client settings for the security and identity of ``config`` (Kafka's Java
    client names or librdkafka's, ``kafka.`` prefix removed), translated as follows:
    ``ssl.truststore.location`` (PEM) -> ``ssl.ca.location``, ``ssl.truststore.certificates`` ->
    ``ssl.ca.pem``, ``ssl.keystore.location`` (PEM key + chain) -> ``ssl.certificate.location`` and
    ``ssl.key.location`` (the same file), ``ssl.keystore.certificate.chain`` / ``ssl.keystore.key``
    -> ``ssl.certificate.pem`` / ``ssl.key.pem``, ``ssl.endpoint.identification.algorithm`` empty ->
    ``none``, ``sasl.mechanism`` -> ``sasl.mechanisms``, ``sasl.jaas.config`` -> ``sasl.username``
    and ``sasl.password`` (unsecured OAUTHBEARER -> ``enable.sasl.oauthbearer.unsecure.jwt`` and
    ``sasl.oauthbearer.config``), a static or file token -> an ``oauth_cb``. Settings that are not
    about security or identity are left out: they are meant for the protocol client or Spark."""
    sec = resolve(config)
    cfg = {k.lower(): v for k, v in (config or {}).items()}
    out: dict = {}
    if bootstrap or cfg.get("bootstrap.servers"):
        out["bootstrap.servers"] = bootstrap or cfg["bootstrap.servers"]
    if cfg.get("client.id"):
        out["client.id"] = cfg["client.id"]
    out["security.protocol"] = sec.protocol
    if sec.tls:
        if sec.ca_file:
            out["ssl.ca.location"] = sec.ca_file
        if sec.ca_pem:
            out["ssl.ca.pem"] = sec.ca_pem
        if sec.cert_file:
            out["ssl.certificate.location"] = sec.cert_file
            out["ssl.key.location"] = sec.key_file or sec.cert_file  # a KIP-651 keystore holds both
        if sec.cert_pem:
            out["ssl.certificate.pem"] = sec.cert_pem
            out["ssl.key.pem"] = sec.key_pem
        if sec.key_password:
            out["ssl.key.password"] = sec.key_password
        out["ssl.endpoint.identification.algorithm"] = "https" if sec.check_hostname else "none"
        if not sec.verify:
            out["enable.ssl.certificate.verification"] = False
        if sec.ciphers:
            out["ssl.cipher.suites"] = sec.ciphers
    if sec.sasl:
        out["sasl.mechanisms"] = sec.mechanism
        if sec.mechanism == "OAUTHBEARER":
            if sec.oauth_unsecured is not None:
                opts = sec.oauth_unsecured
                principal_claim = opts.get("unsecuredLoginPrincipalClaimName", "sub")
                parts = [f"principalClaimName={principal_claim}",
                         f"principal={opts.get('unsecuredLoginStringClaim_' + principal_claim, '')}",
                         f"lifeSeconds={opts.get('unsecuredLoginLifetimeSeconds', '3600')}"]
                if opts.get("unsecuredLoginStringClaim_scope"):
                    parts.append(f"scope={opts['unsecuredLoginStringClaim_scope']}")
                parts += [f"extension_{k}={v}" for k, v in sorted(sec.oauth_extensions.items())]
                out["enable.sasl.oauthbearer.unsecure.jwt"] = True
                out["sasl.oauthbearer.config"] = " ".join(parts)
            else:
                out["oauth_cb"] = _oauth_cb(sec)
        else:
            out["sasl.username"] = sec.username
            out["sasl.password"] = sec.password
    return out


def _oauth_cb(sec: Security):
    """confluent-kafka's token callback for a static or file token: (token, expiry, principal,
    extensions); the expiry is the token's ``exp`` when it is a JWT, else an hour from now (a
    file token is read again when librdkafka refreshes at 80% of it)."""

    def callback(_oauthbearer_config):
        token = sec.oauth_bearer_token()
        claims = token_claims(token)
        expiry = float(claims.get("exp") or time.time() + 3600)
        principal = str(claims.get("sub") or "oncelog")
        return token, expiry, principal, dict(sec.oauth_extensions)

    return callback
