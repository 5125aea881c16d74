"""Authentication and authorization on the broker side, as Kafka configures them.

- ``acls``: ACL bindings and the authorizer (StandardAuthorizer's semantics).
- ``sasl``: sans-IO SASL server mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER).
- ``scram``: SCRAM credentials (KIP-554), salted and hashed, persisted in the data dir.
- ``jaas``: JAAS configuration text, parsed as Kafka's JaasConfig (shared with the client).

This floor knows principals and resources, never coordinators or handlers (tests/test_layers.py).
"""
