"""Gregor's network fuzzer: hostile and malformed traffic against a live broker over TCP.

``make fuzz`` (``python -m tests.fuzz``) runs the long campaign; ``test_fuzz_short.py``
runs a few thousand inputs inside ``make test``. The parts:

- ``requests``: structure-aware request values from kio's generated classes;
- ``batches``: record batches that lie (counts, lengths, codecs, flags, bombs) and the
  validator of what a broker stored;
- ``inputs``: input ``i`` of a seed, of one of five kinds;
- ``target``: the broker and ZooKeeper processes, sending, connection abuse, the other
  client (prober) and the health check;
- ``campaign``: batches of inputs with a check after each, the summary and JSON.

Documentation: docs/testing.md.
"""
