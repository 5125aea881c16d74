"""The GROUP config resource's store: each group's own configs (Kafka 4.x, KIP-848's per-group
settings), persisted in the data directory and read by the group coordinator at every use.

File ``group-configs.json`` in ``--data-dir``: ``{group_id: {config name: value}}``, Kafka names and
the string values as the alter request gave them (validated before they are written: see
:func:`oncelog.config.group_configs.validate`). Replaced atomically (write, fsync, rename, then
the directory fsynced) before the alter is answered, so an answered change survives a crash;
a group with no configs left has no entry. Kafka keeps these as controller config records,
independent of the group itself: configs may be set before a group exists and outlive it.

A full disk (ENOSPC) fails the alter with KAFKA_STORAGE_ERROR and changes nothing in memory.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Mapping

from .. import errors
from ..config import group_configs as gcfg
from ..config.settings import GroupConfig
from .files import atomic_write, fsync_dir

log = logging.getLogger(__name__)

FILE = "group-configs.json"


class GroupConfigStore:
    def __init__(self, data_dir: str, settings: GroupConfig) -> None:
        self.path = os.path.join(data_dir, FILE)
        self.settings = settings  # the broker's group.consumer.* (bounds and defaults)
        self._configs: dict[str, dict[str, str]] = {}
        # The honoured settings by group, parsed and clamped once per change, not per heartbeat.
        self._effective: dict[str, dict[str, int]] = {}
        try:
            with open(self.path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            doc = {}
        for group_id, props in doc.items():
            self._configs[group_id] = dict(props)
            self._effective[group_id] = gcfg.consumer_settings(props, settings)

    def get(self, group_id: str) -> dict[str, str]:
        """The group's own configs (empty if none)."""
        return dict(self._configs.get(group_id, {}))

    def group_ids(self) -> list[str]:
        """The groups that have configs of their own (ListConfigResources' GROUP resources)."""
        return sorted(g for g, props in self._configs.items() if props)

    def consumer_settings(self, group_id: str) -> Mapping[str, int]:
        """The coordinator's hook: the group's own consumer.* settings in force."""
        return self._effective.get(group_id, {})

    def replace(self, group_id: str, props: Mapping[str, str | None], *, validate_only: bool) -> None:
        """Make ``props`` the group's whole set of configs: validated as Kafka's GroupConfig.validate
        (INVALID_CONFIG with its message), then, unless ``validate_only``, written and in force."""
        props = {k: v for k, v in props.items() if v is not None}
        try:
            gcfg.validate(props, self.settings)
        except gcfg.ConfigError as exc:
            raise errors.InvalidConfig(str(exc)) from None
        if validate_only:
            return
        configs = dict(self._configs)
        if props:
            configs[group_id] = props
        else:
            configs.pop(group_id, None)
        try:
            atomic_write(self.path, json.dumps(configs, indent=1, sort_keys=True))
            fsync_dir(os.path.dirname(self.path))
        except OSError as exc:
            raise errors.KafkaStorageError(f"could not write {FILE}: {exc}") from None
        self._configs = configs
        self._effective[group_id] = gcfg.consumer_settings(props, self.settings)
        log.info("group %s configs now %s", group_id, props or "{} (broker defaults)")
