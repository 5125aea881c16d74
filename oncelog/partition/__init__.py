"""Partitions: each topic partition's log together with the transactional state derived from it.

Layers, top-down::

    apis/ (Produce, Fetch, ...)  ->  PartitionManager.get(topic, index) -> Partition
    Partition.append / append_marker / last_stable_offset / aborted_between / delete_records
        validation.py      client batches against the topic config
        producer_state.py  idempotence and open transactions
        txn_index.py       aborted transactions
    storage/ (PartitionLog, LogManager, flusher): bytes and offsets only

:mod:`.internal_topic` is the coordinators' way in: ``__consumer_offsets`` and
``__transaction_state`` are written through the same :meth:`Partition.append`.
"""

from .manager import PartitionManager
from .partition import AppendInfo, AppendOrigin, Partition

__all__ = ["AppendInfo", "AppendOrigin", "Partition", "PartitionManager"]
