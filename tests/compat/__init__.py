"""Client compatibility suite: one module per real Kafka client, like tansu's ``compat/``.

Every module round-trips ``expectations.message_set()`` through its client and asserts on
what the client saw.
"""
