"""kopf handlers: read the resource, call a planner, apply its plan through ZkAdmin, report
status and events. Each module registers its handlers on a given ``kopf.OperatorRegistry``
(never kopf's global one), so tests and the CLI build a fresh operator each time.
"""
