"""Gregor's benchmark harness: Gregor against a peer broker and this machine's limits.

Run it with ``make bench``, ``gregor bench`` or ``python -m bench`` from the repository
root; see ``docs/performance.md``. Every figure is measured in the same run as the
figures it is compared with (A B A B, medians), so ratios survive a noisy machine.

Modules: ``harness`` (plan, run, progress, output), ``targets`` (the brokers under test),
``clients`` (confluent-kafka workloads, one process per measurement), ``fetch_reader``
(a minimal Fetch client), ``limits`` (physical limits), ``report`` (ratios and the
markdown table), ``profiling`` (py-spy flame graphs of the broker).
"""
