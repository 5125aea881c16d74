"""``oncelog serve``'s configuration, generated from the registry: its options, a Kafka
``server.properties`` (``--config FILE``), ``--override NAME=VALUE``, and the
:class:`~oncelog.config.settings.BrokerConfig` they build.

Every broker config is a :class:`~oncelog.config.registry.BrokerConfigDef`; one with a ``flag``
becomes a serve option (a shorthand for the same config), so an option, its default, its help and
the field it sets cannot disagree. Precedence, later wins (as Kafka's ``--override`` over its
file): the registry's defaults < the ``--config`` file < serve options < ``--override``.

Each line of a properties file, each option and each override is checked when the broker starts:

* a broker config oncelog has: parsed and validated with Kafka's type and validator (Kafka's
  message), then set; DescribeConfigs reports it as STATIC_BROKER_CONFIG;
* one that means nothing on one broker (:data:`~oncelog.config.registry.NOT_HONOURED`, or a
  replication factor): accepted, with one INFO line saying why;
* any other name, or a bad value: :class:`ServeConfigError` naming where it came from
  (``server.properties:12``, ``--override``, ``--num-partitions``) — the broker does not start.

Pure apart from reading the file: no sockets, no broker packages.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
from dataclasses import dataclass
from typing import Iterable
from urllib.parse import unquote

from . import registry
from .java_strings import PROPERTIES, unescape
from .settings import (BrokerConfig, FsyncPolicy, GroupConfig, ListenerConfig, LogConfig, SslConfig, TxnConfig, default,
                       metrics_address)


class ServeConfigError(ValueError):
    """A setting the broker refuses to start with; the message names where it came from."""


@dataclass(frozen=True)
class Setting:
    """One ``name=value`` given at start, and where: a file's line, an option, ``--override``."""

    name: str
    value: str
    origin: str


def parse_size(text: str) -> int:
    """A byte count: ``1g``, ``64m``, ``512k``, ``1GiB``, or a plain number."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b").rstrip("i")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


_FLAG_TYPES = {"int": int, "size": parse_size, "str": str}


def _dest(d: registry.BrokerConfigDef) -> str:
    return d.flag.lstrip("-").replace("-", "_")


# The options in help order: where the data lives and who the broker is first.
_FIRST = ("log.dirs", "node.id", "oncelog.fsync", "auto.create.topics.enable", "num.partitions")
SERVE_FLAGS: tuple[registry.BrokerConfigDef, ...] = tuple(sorted(
    (d for d in registry.BROKER_CONFIGS.values() if d.flag),
    key=lambda d: _FIRST.index(d.name) if d.name in _FIRST else len(_FIRST)))


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``serve``'s options: ``--config``, ``--override``, the listener shorthands, and one option
    per registry entry with a flag. Every option defaults to None (= not given), so what was given
    is known without parsing twice; the help shows the registry's default."""
    parser.add_argument("--config", metavar="FILE",
                        help="a Kafka server.properties: broker configs by Kafka's names (lines oncelog "
                             "knows but cannot honour on one broker are accepted with an INFO line; unknown "
                             "names and bad values stop the start, naming the line)")
    parser.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                        help="a broker config by Kafka's name, over the file and the options (repeatable)")
    parser.add_argument("--host", default=None,
                        help="address to listen on (listeners' host; default 127.0.0.1, loopback)")
    parser.add_argument("--port", type=int, default=None, help="port (listeners' port; default 9092; 0 picks "
                                                               "a free one)")
    parser.add_argument("--advertise", metavar="HOST:PORT", default=None,
                        help="address handed to clients in Metadata (advertised.listeners)")
    parser.add_argument("--nodes", type=int, default=None, metavar="N",
                        help="run a cluster of N node processes on this machine, each leading a share of the "
                             "partitions (default: a node per core for a new data directory, up to 16; the count "
                             "an existing one was made with, 1 for one made before clusters). Node K listens on "
                             "the given ports plus K-1; node 1 is the controller and a bootstrap server for all. "
                             "--nodes 1 runs one process")
    parser.add_argument("--cluster-node", type=int, default=None, help=argparse.SUPPRESS)
    for d in SERVE_FLAGS:
        shown = f" (default {d.default})" if d.default is not None and d.flag_kind != "negate" else ""
        help_text = f"{d.name}: {d.flag_help}{shown}"
        if d.flag_kind == "negate":
            parser.add_argument(d.flag, dest=_dest(d), action="store_const", const="false", default=None,
                                help=help_text)
        else:
            parser.add_argument(d.flag, dest=_dest(d), type=_FLAG_TYPES[d.flag_kind], default=None,
                                help=help_text)


# ------------------------------------------------------------------------------------------
# Sources of settings.


def read_properties(path: str) -> list[Setting]:
    """A Java properties file as Kafka reads it (``java.util.Properties.load``): ``#``/``!``
    comments, ``key=value``, ``key: value`` or ``key value``, a backslash at a line's end
    continues it, ``\\t \\n \\uXXXX`` escapes. A name given twice: the last wins, as in Java."""
    try:
        with open(path, encoding="latin-1") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ServeConfigError(f"--config {path}: {exc.strerror or exc}") from None
    out: list[Setting] = []
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_property(line)
        out.append(Setting(key, value, f"{path}:{start + 1}"))
    return out


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return unescape(key, PROPERTIES), unescape(rest, PROPERTIES)


def settings_from_args(args: argparse.Namespace) -> list[Setting]:
    """Everything ``serve`` was given, in precedence order: the file's lines, the options, the
    overrides."""
    out: list[Setting] = []
    if getattr(args, "config", None):
        out.extend(read_properties(args.config))
    for d in SERVE_FLAGS:
        value = getattr(args, _dest(d), None)
        if value is not None:
            out.append(Setting(d.name, str(value), d.flag))
    if args.host is not None or args.port is not None:
        out.append(Setting("listeners", _listener_shorthand(out, args.host, args.port), "--host/--port"))
    if args.advertise is not None:
        out.append(Setting("advertised.listeners", f"PLAINTEXT://{args.advertise}", "--advertise"))
    for text in getattr(args, "override", None) or []:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ServeConfigError(f"--override {text!r}: expected NAME=VALUE")
        out.append(Setting(name.strip(), value.strip(), "--override"))
    return out


def _listener_shorthand(given: list[Setting], host: str | None, port: int | None) -> str:
    """--host/--port change the host or port of the PLAINTEXT listener (else the first one) of the
    listeners given so far (a file's), or of the default ``PLAINTEXT://127.0.0.1:9092``; the other
    listeners stay as they are."""
    current = [s.value for s in given if s.name == "listeners"]
    entries = _split_list(current[-1]) if current else ["PLAINTEXT://127.0.0.1:9092"]
    parsed = [_LISTENER.fullmatch(e) for e in entries]
    target = next((i for i, m in enumerate(parsed) if m and m["name"].upper() == "PLAINTEXT"), 0)
    m = parsed[target]
    if m is None:
        return current[-1]  # malformed: reported with its origin when the listeners are read
    entries[target] = f"{m['name']}://{host if host is not None else m['host']}:{port if port is not None else m['port']}"
    return ",".join(entries)


# ------------------------------------------------------------------------------------------
# From settings to a BrokerConfig.

_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?[0-9]+)")
DEFAULT_PROTOCOL_MAP = registry.BROKER_CONFIGS["listener.security.protocol.map"].kafka_default


def _split_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


SERVED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS = re.compile(r"([a-z0-9-]+)\.sasl\.jaas\.config")
# Per listener and mechanism, as Kafka's listener.name.<l>.oauthbearer.<name>.
_OAUTHBEARER = re.compile(r"oauthbearer\.(sasl\.oauthbearer\.[a-z.]+|sasl\.server\.callback\.handler\.class)")
OAUTHBEARER_CONFIGS = tuple(n for n in registry.BROKER_CONFIGS if n.startswith("sasl.oauthbearer."))
JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
_SSL_FIELDS = {f"ssl.{f.replace('_', '.')}": f for f in SslConfig.__dataclass_fields__}


def _listeners(values: dict[str, Setting], per_listener: dict[str, dict[str, Setting]]
               ) -> tuple[tuple[ListenerConfig, ...], list[str]]:
    """The listeners served (Kafka's ``listeners`` with ``listener.security.protocol.map``,
    ``advertised.listeners`` and ``controller.listener.names``), with each TLS listener's
    ``ssl.*`` (per-listener ``listener.name.<l>.ssl.*`` over the broker-wide ones), and notes."""
    notes = []
    protocols = {}
    pm = values.get("listener.security.protocol.map")
    for entry in _split_list(pm.value if pm else DEFAULT_PROTOCOL_MAP):
        listener, sep, protocol = entry.partition(":")
        if not sep:
            raise ServeConfigError(f"{pm.origin}: Invalid value {pm.value} for configuration "
                                   f"listener.security.protocol.map: entries must be LISTENER:PROTOCOL")
        protocols[listener.strip().upper()] = protocol.strip().upper()
    controllers = {n.upper() for n in _split_list(values["controller.listener.names"].value)} \
        if "controller.listener.names" in values else set()
    s = values.get("listeners", Setting("listeners", "PLAINTEXT://127.0.0.1:9092", "default"))
    bound = []
    for entry in _split_list(s.value):
        m = _LISTENER.fullmatch(entry)
        if m is None:
            raise ServeConfigError(f"{s.origin}: Invalid value {s.value} for configuration listeners: "
                                   f"{entry!r} is not NAME://HOST:PORT")
        name = m["name"].upper()
        if name in controllers:
            notes.append(f"{s.origin}: listener {entry} not opened: it is a controller listener and oncelog has "
                         f"no controller quorum")
            continue
        if name in (b[0] for b in bound):
            raise ServeConfigError(f"{s.origin}: listeners={s.value}: listener {name} is named twice")
        protocol = protocols.get(name)
        if protocol is None:
            raise ServeConfigError(f"{s.origin}: listener {entry}: no security protocol for {name} in "
                                   f"listener.security.protocol.map")
        if protocol not in SERVED_PROTOCOLS:
            raise ServeConfigError(f"{s.origin}: listener {entry}: unknown security protocol {protocol} (Kafka's "
                                   f"are PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")
        port = int(m["port"])
        if not 0 <= port <= 65535:
            raise ServeConfigError(f"{s.origin}: listeners={s.value}: port {port} is not 0..65535")
        # Kafka: an empty host binds every interface.
        bound.append((name, protocol, m["host"].strip("[]") or "0.0.0.0", port))
    if not bound:
        raise ServeConfigError(f"{s.origin}: listeners={s.value}: no listener for clients")
    advertised: dict[str, tuple[str, int]] = {}
    if "advertised.listeners" in values:
        a = values["advertised.listeners"]
        for entry in _split_list(a.value):
            m = _LISTENER.fullmatch(entry)
            if m is None:
                raise ServeConfigError(f"{a.origin}: Invalid value {a.value} for configuration "
                                       f"advertised.listeners: {entry!r} is not NAME://HOST:PORT")
            advertised[m["name"].upper()] = (m["host"], int(m["port"]))
    unknown = set(per_listener) - {b[0] for b in bound} - controllers
    if unknown:
        name = sorted(unknown)[0]
        first = next(iter(per_listener[name].values()))
        raise ServeConfigError(f"{first.origin}: {first.name}: there is no listener {name} in listeners")
    out = []
    for name, protocol, host, port in bound:
        ssl = None
        if protocol in ("SSL", "SASL_SSL"):
            ssl = _ssl_config(name, values, per_listener.get(name, {}))
        host_port = advertised.get(name)
        if host_port is not None and not host_port[0]:
            host_port = (host, host_port[1])
        mechanisms: tuple[str, ...] = ()
        jaas: dict[str, str] = {}
        own = per_listener.get(name, {})
        if protocol.startswith("SASL_"):
            m_setting = own.get("sasl.enabled.mechanisms") or values.get("sasl.enabled.mechanisms")
            d = registry.BROKER_CONFIGS["sasl.enabled.mechanisms"]
            mechanisms = tuple(registry.parse_value(d.name, m_setting.value if m_setting else d.default, d.type))
            jaas = {k.split(".", 1)[0].upper(): v.value for k, v in own.items() if _JAAS.fullmatch(k)}
            for mechanism in ("PLAIN", "OAUTHBEARER"):
                if mechanism in mechanisms and mechanism not in jaas:
                    raise ServeConfigError(f"listener {name}: {mechanism} is enabled: give its users in "
                                           f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config")
        oauthbearer = _oauthbearer(name, values, own) if "OAUTHBEARER" in mechanisms else ()
        out.append(ListenerConfig(name, protocol, host, port, host_port, ssl, mechanisms, tuple(sorted(jaas.items())),
                                  oauthbearer))
    return tuple(out), notes


def _oauthbearer(listener: str, values: dict[str, Setting], own: dict[str, Setting]) -> tuple[tuple[str, str], ...]:
    """A listener's ``sasl.oauthbearer.*`` (``listener.name.<l>.oauthbearer.<name>`` over
    ``<name>``, as Kafka's ConfigurationUtils), with the JWKS URL checked now as Kafka checks it at
    start: a ``file:`` URL of a readable JWKS JSON file (its keys are read by the broker)."""
    given = {n: own.get("oauthbearer." + n) or values.get(n) for n in OAUTHBEARER_CONFIGS}
    found = {n: s for n, s in given.items() if s is not None}
    handler = own.get("oauthbearer.sasl.server.callback.handler.class") \
        or values.get("sasl.server.callback.handler.class")
    url = found.get(JWKS_URL)
    if handler is not None and handler.value.strip() in registry.OAUTHBEARER_VALIDATOR_CLASSES and url is None:
        raise ServeConfigError(f"{handler.origin}: listener {listener}: {handler.value.strip()}: The OAuth "
                               f"configuration option {JWKS_URL} must be non-null")
    if url is not None:
        _check_jwks_url(url)
    return tuple((n, s.value) for n, s in sorted(found.items()))


def _check_jwks_url(s: Setting) -> None:
    scheme, sep, rest = s.value.strip().partition(":")
    scheme = scheme.lower()
    if scheme in ("http", "https"):
        raise ServeConfigError(f"{s.origin}: {JWKS_URL}={s.value}: oncelog does not fetch a JWKS over the network; "
                               f"give a file: URL of the JWKS JSON (e.g. file:///etc/oncelog/jwks.json)")
    if not sep or scheme != "file":
        raise ServeConfigError(f"{s.origin}: The OAuth configuration option {JWKS_URL} contains a URL ({s.value}) "
                               f"that is not a file: URL")
    path = os.path.abspath(unquote(re.sub(r"^//[^/]*", "", rest)))  # file:///p, file:/p
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise ServeConfigError(f"{s.origin}: {JWKS_URL}={s.value}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ServeConfigError(f"{s.origin}: {JWKS_URL}={s.value}: a JWKS is a JSON object with a \"keys\" array")


def _parse(name: str, d: registry.BrokerConfigDef, s: Setting, *, validate: bool = True):
    """A setting's value by Kafka's type, checked by its validator; ServeConfigError (Kafka's
    message) naming where the setting came from."""
    try:
        value = registry.parse_value(name, s.value, d.type)
        if validate and d.validator is not None and value is not None:
            d.validator(name, value)
    except registry.ConfigError as exc:
        raise ServeConfigError(f"{s.origin}: {exc}") from None
    return value


def _ssl_config(listener: str, values: dict[str, Setting], own: dict[str, Setting]) -> SslConfig:
    fields: dict[str, object] = {}
    for config_name, field_name in _SSL_FIELDS.items():
        s = own.get(config_name) or values.get(config_name)
        if s is None:
            continue
        value = _parse(config_name, registry.BROKER_CONFIGS[config_name], s)
        fields[field_name] = tuple(value) if isinstance(value, list) else value
    config = SslConfig(**fields)
    has_chain = config.keystore_location or (config.keystore_certificate_chain and config.keystore_key)
    if not has_chain:
        raise ServeConfigError(f"listener {listener} is TLS: give ssl.keystore.location (a PEM file with the "
                               f"certificate chain and key), or ssl.keystore.certificate.chain and ssl.keystore.key "
                               f"(for it alone: listener.name.{listener.lower()}.ssl.*)")
    if config.client_auth != "none" and not (config.truststore_location or config.truststore_certificates):
        raise ServeConfigError(f"listener {listener}: ssl.client.auth={config.client_auth} needs "
                               f"ssl.truststore.location or ssl.truststore.certificates")
    return config


def build_broker_config(given: Iterable[Setting]) -> tuple[BrokerConfig, list[str]]:
    """The BrokerConfig these settings make (later ones win), and the INFO lines to log (what was
    accepted without effect, and why). Raises ServeConfigError naming the first bad one.

    1. each name: not honoured on one broker (a note), unknown (error), or parsed and validated
       with Kafka's type and validator and routed to its field (or to the topic defaults);
    2. the listeners: each one served, its TLS settings, and what is advertised for it;
    3. the data directory (log.dirs, else log.dir);
    4. the topic configs' broker defaults, resolved through the layers as Kafka resolves synonyms;
    5. the checks across settings (node.id vs broker.id, the session timeout bounds, the
       group.share.* bounds and Kafka's cross-checks of them);
    6. no listener without authentication beyond loopback unless
       ``oncelog.allow.unauthenticated.listeners=true`` (then a WARNING note). A SASL listener
       counts as unauthenticated when any mechanism it offers proves nothing
       (:func:`_unproven_mechanisms`: unsecured OAUTHBEARER), mTLS or not: a client picks the
       mechanism, and the session's principal is then the one it wrote itself."""
    values: dict[str, Setting] = {}
    for s in given:
        values[s.name] = s
    notes: list[str] = []
    fields: dict[str, object] = {}
    group: dict[str, object] = {}
    txn: dict[str, object] = {}
    topic_synonyms: dict[str, str] = {}
    static: dict[str, str] = {}
    per_listener: dict[str, dict[str, Setting]] = {}
    # Step 1.
    for name, s in values.items():
        if name.startswith("listener.name."):
            listener, _, rest = name[len("listener.name."):].partition(".")
            oauth = _OAUTHBEARER.fullmatch(rest)
            rest_name = "sasl.jaas.config" if _JAAS.fullmatch(rest) else oauth[1] if oauth else rest
            d = registry.BROKER_CONFIGS.get(rest_name)
            if not listener or d is None or not (rest.startswith("ssl.") or rest == "sasl.enabled.mechanisms"
                                                 or _JAAS.fullmatch(rest) or oauth):
                raise ServeConfigError(f"{s.origin}: {name}: oncelog knows per-listener ssl.*, "
                                       f"sasl.enabled.mechanisms, <mechanism>.sasl.jaas.config and "
                                       f"oauthbearer.sasl.oauthbearer.* only")
            _parse(rest_name, d, s)
            per_listener.setdefault(listener.upper(), {})[rest] = Setting(rest, s.value, s.origin)
            continue
        if name in registry.NOT_HONOURED:
            notes.append(f"{s.origin}: {name}={s.value} accepted, no effect: {registry.NOT_HONOURED[name]}")
            continue
        d = registry.BROKER_CONFIGS.get(name)
        if d is None:
            hint = " (a topic config: set it per topic, or its broker default log.*)" \
                if name in registry.TOPIC_CONFIGS else ""
            raise ServeConfigError(f"{s.origin}: {registry.unknown_broker_config(name)}{hint}")
        # A topic config's broker default is validated below as the LogConfig it builds
        # (segment.bytes' floor is 14 bytes there, not Kafka 4's 1 MiB).
        value = _parse(name, d, s, validate=name not in registry.TOPIC_SYNONYM_NAMES)
        static[name] = s.value
        if d.handling is registry.Handling.NO_EFFECT:
            if value != 1:
                notes.append(f"{s.origin}: {name}={s.value} accepted, no effect: one broker, every partition "
                             f"has one replica")
            continue
        if name in registry.TOPIC_SYNONYM_NAMES:
            topic_synonyms[name] = s.value
            continue
        if d.setting is None:
            continue  # listeners and their kin: below; log.dir: only without log.dirs
        if isinstance(value, int) and not isinstance(value, bool):
            value *= d.factor
        if name == "oncelog.fsync":
            try:
                value = FsyncPolicy.parse(value)
            except ValueError as exc:
                raise ServeConfigError(f"{s.origin}: {exc}") from None
        path = d.setting.split(".")
        {"group": group, "txn": txn}.get(path[0], fields)[path[-1]] = value
    # Step 2.
    listeners, listener_notes = _listeners(values, per_listener)
    notes += listener_notes
    first = listeners[0]
    host, port = first.host, first.port
    advertise = f"{first.advertised[0]}:{first.advertised[1]}" if first.advertised else None
    # Step 3. log.dirs, else log.dir, as Kafka.
    if "data_dir" not in fields and "log.dir" in values:
        fields["data_dir"] = values["log.dir"].value
    data_dir = fields.get("data_dir")
    if not data_dir:
        raise ServeConfigError("no data directory: give --data-dir, or log.dirs in the --config file")
    if "," in str(data_dir):
        origin = values["log.dirs"].origin if "log.dirs" in values else values["log.dir"].origin
        raise ServeConfigError(f"{origin}: log.dirs={data_dir}: oncelog keeps its data in one directory")
    # Step 4. log.retention.hours and its synonyms resolve as in Kafka; checked as serve options
    # always were (LogConfig.validate).
    layers = registry.BrokerLayers(static=topic_synonyms)
    try:
        log = LogConfig.from_values(layers.topic_defaults())
        log.validate()
    except registry.ConfigError as exc:
        raise ServeConfigError(f"{_origin_of(exc, values)}: {exc}") from None
    # Step 5.
    if "node_id" in fields and "node.id" in values and "broker.id" in values \
            and values["node.id"].value.strip() != values["broker.id"].value.strip():
        raise ServeConfigError(f"{values['broker.id'].origin}: broker.id={values['broker.id'].value} differs "
                               f"from node.id={values['node.id'].value}")
    # A broker's initial rebalance delay defaults to Kafka's (the bare GroupConfig's is none).
    group_config = GroupConfig(**{"initial_rebalance_delay_ms": default("group.initial.rebalance.delay.ms"), **group})
    if group_config.min_session_timeout_ms > group_config.max_session_timeout_ms:
        # Kafka accepts this and then refuses every JoinGroup; refusing to start says why at once.
        def label(name: str) -> str:  # the option, if one gave it; else the name and where it came from
            s = values.get(name)
            if s is not None and s.origin.startswith("--") and s.origin != "--override":
                return s.origin
            return f"{name} ({s.origin})" if s is not None else f"{name} (default)"

        raise ServeConfigError(f"{label('group.min.session.timeout.ms')} ({group_config.min_session_timeout_ms}) "
                               f"is above {label('group.max.session.timeout.ms')} "
                               f"({group_config.max_session_timeout_ms})")
    bounds = group_config.consumer_bounds_error()
    if bounds is not None:
        name, value, bound_name, bound = bounds
        raise ServeConfigError(f"{name}={value} is outside its bounds: {bound_name}={bound} (as Kafka, the broker "
                               f"does not start; set {bound_name} too)")
    share_error = group_config.share_settings_error()
    if share_error is not None:
        raise ServeConfigError(f"{share_error} (as Kafka, the broker does not start)")
    config = BrokerConfig(**fields, host=host, port=port, advertise=advertise, log=log, group=group_config,
                          txn=TxnConfig(**txn), listeners=listeners if "listeners" in values else (), given=static)
    # Step 6. The safe default: no unauthenticated listener beyond loopback unless asked for.
    for lc in listeners:
        unproven = _unproven_mechanisms(lc)
        if (_authenticated(lc) and not unproven) or _loopback(lc.host):
            continue
        where = f"listener {lc.name} on {lc.host}:{lc.port}"
        if unproven:
            what = (f"{where} authenticates no one: it offers unsecured OAUTHBEARER (no {JWKS_URL}: tokens "
                    f"with alg none, signed by nobody), so any client that can reach it names its own principal")
            if config.authorizer_class_name:
                admins = sorted(u.strip() for u in (config.super_users or "").split(";") if u.strip())
                what += (f", {admins[0]} included (a super user)" if admins
                         else " and may do what the ACLs allow any principal")
            else:
                what += (" and, with no authorizer (authorizer.class.name), may read, write, alter and delete every "
                         "topic, group, transaction and config")
            fix = (f"Bind it to 127.0.0.1, set listener.name.{lc.name.lower()}.oauthbearer.{JWKS_URL} (signed "
                   f"tokens only) or take OAUTHBEARER out of its sasl.enabled.mechanisms, or set "
                   f"oncelog.allow.unauthenticated.listeners=true to accept that")
        else:
            what = f"{where} has no authentication: any client that can reach it acts as User:ANONYMOUS"
            if config.authorizer_class_name:
                what += f" and may do what the ACLs allow User:ANONYMOUS (allow.everyone.if.no.acl.found=" \
                        f"{str(config.allow_everyone_if_no_acl_found).lower()})"
            else:
                what += (" and, with no authorizer (authorizer.class.name), may read, write, alter and delete every "
                         "topic, group, transaction and config")
            fix = ("Bind it to 127.0.0.1, use SASL or mTLS (ssl.client.auth=required), or set "
                   "oncelog.allow.unauthenticated.listeners=true to accept that")
        if not config.allow_unauthenticated_listeners:
            raise ServeConfigError(f"{what}. {fix}")
        notes.append(f"WARNING: {what} (oncelog.allow.unauthenticated.listeners=true)")
    # The metrics endpoint authenticates no one either: the same rule.
    metrics = metrics_address(config.metrics_listener)
    if metrics is not None and not _loopback(metrics[0]):
        what = (f"the metrics endpoint oncelog.metrics.listener={config.metrics_listener} has no authentication: "
                f"anyone who can reach it reads every topic's, group's and transactional id's name and sizes")
        if not config.allow_unauthenticated_listeners:
            raise ServeConfigError(f"{what}. Bind it to 127.0.0.1, or set oncelog.allow.unauthenticated.listeners=true "
                                   "to accept that")
        notes.append(f"WARNING: {what} (oncelog.allow.unauthenticated.listeners=true)")
    return config, notes



def _authenticated(lc: ListenerConfig) -> bool:
    return lc.security_protocol.startswith("SASL_") or (lc.ssl is not None and lc.ssl.client_auth == "required")


def _unproven_mechanisms(lc: ListenerConfig) -> list[str]:
    """The SASL mechanisms a listener offers that prove nothing about the client: OAUTHBEARER
    without ``sasl.oauthbearer.jwks.endpoint.url`` validates unsecured tokens (Kafka's
    OAuthBearerUnsecuredValidatorCallbackHandler), whose principal claim the client writes. PLAIN
    and SCRAM check a password or a key; OAUTHBEARER with a JWKS checks a signature."""
    if not lc.sasl:
        return []
    return [m for m in lc.sasl_mechanisms if m == "OAUTHBEARER" and not dict(lc.oauthbearer).get(JWKS_URL)]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def _origin_of(exc: Exception, values: dict[str, Setting]) -> str:
    """The origin of the setting a LogConfig validation message names (Kafka names the topic
    config; the setting given is one of its broker synonyms)."""
    text = str(exc)
    for name, s in values.items():
        topic = registry.TOPIC_CONFIGS.get(registry.synonym_target(name) or "")
        if name in text or (topic is not None and f"configuration {topic.name}" in text):
            return s.origin
    return "serve options"
