"""Producer id allocation that never hands out the same id twice, even across crashes.

Ids are taken from blocks of :data:`BLOCK_SIZE`. Before the first id of a block is handed out,
the end of that block is written (atomically, fsynced: the metadata store) to ``producer-ids.json``; at start-up
allocation resumes from the recorded end. A crash therefore skips at most the rest of one
block, and never reuses an id (as Kafka's controller-allocated id blocks).

A block that cannot be recorded (a full disk) is not taken: :meth:`ProducerIdManager.allocate`
raises :class:`~oncelog.errors.CoordinatorLoadInProgress`, retriable, as Kafka's broker answers
while it waits for its next block from the controller; the next call tries again.
"""

from __future__ import annotations

from .. import errors
from .store import PRODUCER_IDS, MetadataStore

BLOCK_SIZE = 1000


class ProducerIdManager:
    """In a cluster of ``stride`` nodes (:mod:`oncelog.cluster`) node ``k`` keeps its own
    document in its own directory and hands out ``n * stride + k - 1`` for its counter ``n``:
    the nodes' ids never meet, and no node asks another for a block."""

    def __init__(self, store: MetadataStore | str, *, stride: int = 1, offset: int = 0) -> None:
        """``store``: the data directory's metadata store (or the directory's path)."""
        self.store = store if isinstance(store, MetadataStore) else MetadataStore(store)
        self.stride, self.offset = stride, offset
        start = int(self.store.read(PRODUCER_IDS, {"next_block_start": 0})["next_block_start"])
        self.next_id = start
        self.block_end = start  # forces a durable block reservation before the first id

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            block_end = self.next_id + BLOCK_SIZE
            try:  # durable before any id of it is handed out
                self.store.write(PRODUCER_IDS, {"next_block_start": block_end}, indent=None)
            except OSError as exc:
                raise errors.CoordinatorLoadInProgress(
                    f"cannot reserve the next block of producer ids in {self.store.path(PRODUCER_IDS)}: "
                    f"{exc.strerror or exc}") from exc
            self.block_end = block_end
        pid = self.next_id
        self.next_id += 1
        return pid * self.stride + self.offset

    def was_issued(self, producer_id: int) -> bool:
        if self.stride == 1:
            return 0 <= producer_id < self.next_id
        n, k = divmod(producer_id, self.stride)
        return producer_id >= 0 and k == self.offset and n < self.next_id
