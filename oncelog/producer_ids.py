"""Producer id allocation that never hands out the same id twice, even across crashes.

Ids are taken from blocks of :data:`BLOCK_SIZE`. Before the first id of a block is handed out,
the end of that block is written (atomically, fsynced) to ``producer-ids.json``; at start-up
allocation resumes from the recorded end. A crash therefore skips at most the rest of one
block, and never reuses an id (as Kafka's controller-allocated id blocks).
"""

from __future__ import annotations

import json
import os

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
            self.block_end = self.next_id + BLOCK_SIZE
            atomic_write(self.path, json.dumps({"next_block_start": self.block_end}))
        pid = self.next_id
        self.next_id += 1
        return pid

    def was_issued(self, producer_id: int) -> bool:
        return 0 <= producer_id < self.next_id
