"""A fetch's session fields (KIP-227, Kafka's ``FetchMetadata``): what its session id and
epoch mean, shared by the leader's session cache (``server/fetch_sessions.py``) and a
follower's own session (``replication/fetcher.py``).

- epoch -1 (``FINAL_EPOCH``): a full fetch without a session; a session id names a
  session to close first;
- epoch 0 (``INITIAL_EPOCH``): a full fetch that asks for a new session (closing the one
  it names); the response carries the new id, or ``INVALID_SESSION_ID`` when the
  leader's cache has no room;
- epoch > 0: an incremental fetch in the session it names, at the session's next epoch.
"""

from __future__ import annotations

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Matches Kafka's ``FetchMetadata.nextEpoch``: -1 stays -1, the maximum wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1
