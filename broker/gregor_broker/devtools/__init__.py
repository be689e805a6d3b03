"""Development process runners: a local ZooKeeper and a local Gregor cluster.

``gregor local`` (cli/local.py), ``make run``, the tests and the bench start real
ZooKeeper and broker processes through these. They are tools around the broker, not part
of the cluster model, so they sit above the server layer and nothing in the broker imports
them.
"""
