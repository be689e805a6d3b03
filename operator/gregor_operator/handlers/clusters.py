"""GregorCluster resources (see docs/operator.md); registered after topics and quotas."""

from __future__ import annotations

import kopf

from gregor_operator.handlers.common import Context


def register(registry: kopf.OperatorRegistry, ctx: Context) -> None:
    """Nothing yet beyond the index in ``common``."""
