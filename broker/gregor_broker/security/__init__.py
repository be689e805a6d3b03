"""Authentication building blocks shared by the broker, its followers and the CLI.

SASL mechanisms (PLAIN, SCRAM-SHA-256/512) as pure state machines over bytes, SCRAM
credentials in Kafka's ZooKeeper format, JAAS option parsing, TLS contexts from PEM and
the mapping of certificates to principals. No sockets and no ZooKeeper here: the server
(``server/sasl_authenticator.py``), the follower client (``replication/client.py``) and
``cluster/scram_credentials.py`` drive them. See docs/security.md.
"""
