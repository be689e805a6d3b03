"""SCRAM credentials in ZooKeeper, where Kafka keeps them: ``/config/users/<user>``.

The node is the user's entity config (shared with its client quotas), one key per
mechanism (``SCRAM-SHA-256``, ``SCRAM-SHA-512``) holding Kafka's credential string; a
change is announced with a ``/config/changes`` notification like any entity config, so
every broker's metadata cache (``MetadataCache.quota_configs``, which holds every
``users/<u>`` config) sees it within moments. This is the one writer used by the
AlterUserScramCredentials handler and ``gregor users scram``.
"""

from __future__ import annotations

from collections.abc import Mapping

from kazoo.exceptions import NoNodeError

from ..security.scram import MECHANISMS, ScramCredential
from .admin import ZkAdmin
from .zk_paths import CONFIG_USERS, desanitize, sanitize


def user_entity_path(user: str) -> str:
    return f"users/{sanitize(user)}"


def storable_user(user: str) -> bool:
    """Whether ``user`` has a znode of its own: the empty name, "." and ".." (which
    sanitizing keeps) are no znode names ZooKeeper accepts, so no credentials can be
    stored under them, and reading them fails with a path error."""
    return sanitize(user) not in ("", ".", "..")


def credentials_in(config: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The readable SCRAM credentials of one user's entity config, by mechanism."""
    found = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            found[mechanism] = ScramCredential.from_zk(text)
        except ValueError:
            continue
    return found


def read_scram_credentials(zk_admin: ZkAdmin, user: str) -> dict[str, ScramCredential]:
    return credentials_in(zk_admin.get_entity_config(user_entity_path(user)))


def read_all_scram_credentials(zk_admin: ZkAdmin) -> dict[str, dict[str, ScramCredential]]:
    """Every user with at least one SCRAM credential."""
    try:
        children = zk_admin.client.get_children(CONFIG_USERS)
    except NoNodeError:
        return {}
    result = {}
    for child in sorted(children):
        credentials = credentials_in(zk_admin.get_entity_config(f"users/{child}"))
        if credentials:
            result[desanitize(child)] = credentials
    return result


def alter_scram_credentials(
    zk_admin: ZkAdmin,
    user: str,
    upsert: Mapping[str, ScramCredential],
    delete: tuple[str, ...] = (),
) -> None:
    """Set and remove mechanisms of one user (its quotas kept), then notify the brokers."""
    path = user_entity_path(user)
    config = zk_admin.get_entity_config(path)
    for mechanism in delete:
        config.pop(mechanism, None)
    for mechanism, credential in upsert.items():
        config[mechanism] = credential.to_zk()
    zk_admin.set_entity_config(path, config)


def cached_credential(
    user_configs: Mapping[str, Mapping[str, str]], user: str, mechanism: str
) -> ScramCredential | None:
    """A credential from a broker's cache of ``users/<u>`` entity configs (no ZooKeeper
    read on the login path)."""
    text = user_configs.get(user_entity_path(user), {}).get(mechanism)
    if text is None or mechanism not in MECHANISMS:
        return None
    try:
        return ScramCredential.from_zk(text)
    except ValueError:
        return None
