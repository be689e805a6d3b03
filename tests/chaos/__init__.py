"""Gregor's chaos campaign: a seeded nemesis against a real 3-broker cluster under load.

``make chaos`` (``python -m tests.chaos``) runs the long campaign; ``test_chaos_short.py``
runs a short one inside ``make test``. The parts:

- ``cluster``: ZooKeeper and three broker processes (each in its own network namespace
  when namespaces can be made, so that network partitions are possible), and the
  low-level faults (kill -9, SIGSTOP, torn segment tails, partitions);
- ``load``: idempotent acks=all producers recording every acknowledgement, and a
  committing consumer group with a sampler of its committed offsets;
- ``nemesis``: the seeded schedule of fault kinds and their recovery;
- ``checker``: what the cluster holds afterwards (through a consumer and from every
  replica's files) against what was acknowledged;
- ``campaign``: one run end to end, its summary table and JSON result.

Documentation: docs/testing.md.
"""
