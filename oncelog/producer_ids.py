"""Producer id allocation that never hands out the same id twice, even across crashes.

Ids are taken from blocks of :data:`BLOCK_SIZE`. Before the first id of a block is handed out,
the end of that block is written (atomically, fsynced) to ``producer-ids.json``; at start-up
allocation resumes from the recorded end. A crash therefore skips at most the rest of one
block, and never reuses an id (as Kafka's controller-allocated id blocks).

A block that cannot be recorded (a full disk) is not taken: :meth:`ProducerIdManager.allocate`
raises :class:`~oncelog.errors.CoordinatorLoadInProgress`, retriable, as Kafka's broker answers
while it waits for its next block from the controller; the next call tries again.
"""

from __future__ import annotations

import json
import os

from . import errors
from .storage.files import atomic_write

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, "producer-ids.json")
        start = 0
        try:
            with open(self.path) as f:
                start = int(json.load(f)["next_block_start"])
        except FileNotFoundError:
            pass
        self.next_id = start
        self.block_end = start  # forces a durable block reservation before the first id

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            block_end = self.next_id + BLOCK_SIZE
            try:  # durable before any id of it is handed out
                atomic_write(self.path, json.dumps({"next_block_start": block_end}))
            except OSError as exc:
                raise errors.CoordinatorLoadInProgress(
                    f"cannot reserve the next block of producer ids in {self.path}: {exc.strerror or exc}") from exc
            self.block_end = block_end
        pid = self.next_id
        self.next_id += 1
        return pid

    def was_issued(self, producer_id: int) -> bool:
        return 0 <= producer_id < self.next_id
