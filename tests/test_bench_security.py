"""The bench's security targets (bench/security.py): target names, the broker's and
the clients' settings, and the "PROTOCOL / PLAINTEXT" ratio rows. Pure code: no broker."""

from __future__ import annotations

import pytest

from bench import security as sec
from bench.modes import MODES, Target, security_comparisons


def test_a_plus_protocol_names_the_same_broker_over_that_protocol():
    t = Target.parse("oncelog-never+sasl_ssl")
    assert (t.name, t.kind, t.fsync, t.security) == ("oncelog-never+sasl_ssl", "oncelog", "never", "sasl_ssl")
    assert t.plaintext_name == "oncelog-never"
    assert t.label == "oncelog fsync never SASL_SSL"
    plain = Target.parse("oncelog-interval:50")
    assert (plain.security, plain.plaintext_name) == ("plaintext", "oncelog-interval:50")


def test_an_unknown_protocol_or_a_secured_tansu_is_refused():
    with pytest.raises(ValueError, match="unknown security protocol"):
        Target.parse("oncelog-never+tls")
    with pytest.raises(ValueError):
        Target.parse("tansu+ssl")


def test_ratio_rows_for_each_secured_target_whose_plaintext_twin_runs():
    targets = [Target.parse(t) for t in ("oncelog-never", "oncelog-never+ssl", "oncelog-never+sasl_plaintext",
                                         "oncelog-always+sasl_ssl")]  # no oncelog-always: no row for it
    matrix = [(1024, MODES["acks1"]), (1024, MODES["acksall"])]
    rows = security_comparisons(targets, matrix)
    assert {(c.numerator, c.denominator) for c in rows} == {("oncelog-never+ssl", "oncelog-never"),
                                                           ("oncelog-never+sasl_plaintext", "oncelog-never")}
    assert len(rows) == 2 * 2 * 2  # 2 targets x 2 modes x produce/consume
    ssl_produce = [c for c in rows if c.numerator.endswith("+ssl") and c.metric == "produce"]
    assert [c.label for c in ssl_produce] == ["SSL / PLAINTEXT produce 1 KB acks=1 (oncelog-never)",
                                              "SSL / PLAINTEXT produce 1 KB acks=all (oncelog-never)"]
    assert {c.goal for c in rows if "+ssl" in c.numerator} == {0.7}  # TLS: less than 30% cost
    assert {c.goal for c in rows if "+sasl_plaintext" in c.numerator} == {None}


def test_settings_of_broker_and_clients():
    certs = sec.Certificates("/d/ca.pem", "/d/broker.pem")
    assert sec.broker_args("plaintext", 0, None) == [] and sec.client_config("plaintext", None) == {}
    args = sec.broker_args("sasl_ssl", 9094, certs)
    assert "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:9094" in args
    assert "ssl.keystore.location=/d/broker.pem" in args
    assert "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512" in args
    assert sec.client_config("sasl_ssl", certs) == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": "/d/ca.pem", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench", "sasl.password": "bench-secret"}
    assert sec.client_config("ssl", certs) == {"security.protocol": "SSL", "ssl.ca.location": "/d/ca.pem"}
    assert not any(a.startswith("ssl.") for a in sec.broker_args("sasl_plaintext", 9093, None))
