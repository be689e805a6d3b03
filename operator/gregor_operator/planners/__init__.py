"""Pure planners: plain data in, plain data out; no Kubernetes, ZooKeeper or clock.

The kopf handlers read state, call a planner, apply what it returns and report status
(docs/operator.md). Everything hard about safety lives here, so it is tested alone.
"""
