"""The broker's lower floors wired as ``Broker`` wires them, without a broker: the metadata, the
logs and the PartitionManager of one data directory, for tests of what sits on them (internal
topics, coordinators' stores, storage tasks)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from oncelog.config.settings import FsyncPolicy, LogConfig
from oncelog.metadata import Metadata
from oncelog.partition import PartitionManager
from oncelog.storage.log_manager import LogManager


@dataclass
class Parts:
    metadata: Metadata
    logs: LogManager
    partitions: PartitionManager

    async def close(self) -> None:
        await self.partitions.close()


def open_parts(data_dir: str, config: LogConfig = LogConfig(), *, static: Mapping[str, str] | None = None,
               clock: Callable[[], int] | None = None, fsync: str = "never", node_id: int = 1) -> Parts:
    """Open (or create) ``data_dir`` as a broker would, up to the PartitionManager."""
    metadata = Metadata(data_dir, node_id=node_id, default_config=config, static=static)
    live = metadata.configs
    logs = LogManager(data_dir, FsyncPolicy(fsync), compaction_interval_ms=lambda: live.compaction_interval_ms,
                      clock=clock)
    partitions = PartitionManager(logs, live, metadata, node_id=node_id)
    metadata.topics.logs = partitions
    metadata.open(logs)
    partitions.open()
    return Parts(metadata, logs, partitions)
