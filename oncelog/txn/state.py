"""A transactional id's state: Kafka's TransactionState, its transition table, and the metadata
the coordinator keeps per transactional id (and writes to ``__transaction_state``, see
:mod:`oncelog.txn.records`).

States (the value is Kafka's state byte on disk)::

                         AddPartitions / AddOffsets
     +-------+ -----------------------------------------> +---------+ --+ AddPartitions
     | Empty |                                            | Ongoing |   | (more partitions)
     +-------+                                            +---------+ <-+
      | ^  |                                               |   |   |
      | |  | InitProducerId                 EndTxn(commit) |   |   | timeout, or InitProducerId
      | +--+ (epoch bump)                                  |   |   | of a new instance
      |                  +---------------------------------+   |   v
      |                  |                                     | +-------------------+
      |                  |                       EndTxn(abort) | | PrepareEpochFence | epoch bumped
      |                  |                                     | +-------------------+
      |                  v                                     v   v
      |          +---------------+                     +--------------+
      |          | PrepareCommit |                     | PrepareAbort |
      |          +---------------+                     +--------------+
      |                  | markers written                     | markers written
      |                  v                                     v
      |         +----------------+                     +---------------+
      |         | CompleteCommit |                     | CompleteAbort |
      |         +----------------+                     +---------------+
      v
  +------+  from Empty, CompleteCommit or CompleteAbort once the id is expired
  | Dead |  (transactional.id.expiration.ms): a tombstone, the id is forgotten
  +------+

CompleteCommit and CompleteAbort leave as Empty does (InitProducerId -> Empty, AddPartitions ->
Ongoing). Transaction version 2 may also abort with no transaction open: Empty, CompleteCommit
or CompleteAbort -> PrepareAbort. :data:`TRANSITIONS` is the same graph as a table (Kafka's
``validPreviousStates`` read forwards); every change goes through
:meth:`TransactionMetadata.prepare_transition`, which checks it (the idiom of
:mod:`oncelog.state_machine`, shared with the group coordinator).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..state_machine import KafkaState, check_transition

MAX_EPOCH = 32767 - 1  # Kafka keeps Short.MAX_VALUE free


class TransactionState(KafkaState, enum.IntEnum):
    # values are Kafka's on-disk state bytes; kafka_name (KafkaState): PREPARE_COMMIT -> PrepareCommit
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


T = TransactionState
TRANSITIONS: dict[TransactionState, frozenset[TransactionState]] = {
    T.EMPTY: frozenset({T.EMPTY, T.ONGOING, T.PREPARE_ABORT, T.DEAD}),
    T.ONGOING: frozenset({T.ONGOING, T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE}),
    T.PREPARE_COMMIT: frozenset({T.COMPLETE_COMMIT}),
    T.PREPARE_ABORT: frozenset({T.COMPLETE_ABORT}),
    T.COMPLETE_COMMIT: frozenset({T.EMPTY, T.ONGOING, T.PREPARE_ABORT, T.DEAD}),
    T.COMPLETE_ABORT: frozenset({T.EMPTY, T.ONGOING, T.PREPARE_ABORT, T.DEAD}),
    T.PREPARE_EPOCH_FENCE: frozenset({T.PREPARE_ABORT}),
    T.DEAD: frozenset(),
}


NO_PARTITIONS: frozenset[tuple[str, int]] = frozenset()


@dataclass(slots=True)
class TransactionMetadata:
    """What the coordinator knows of one transactional id: the value of its latest
    ``__transaction_state`` record plus two in-memory fields, ``pending`` and ``waiting``.

    A broker may hold a million of these (clients choose how many transactional ids they use;
    ``transactional.id.expiration.ms`` bounds how long an idle one stays), so they are kept
    small: slots, no per-instance containers while idle (``partitions`` is an immutable set,
    shared and empty outside a transaction; ``waiting`` is None until a request queues), and the
    transactional id object shared with the coordinator's key. About 0.3 KB each with the
    coordinator's dict entry (``python -m bench txnids``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = T.EMPTY
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # Immutable: a change builds a new set (``new.partitions |= more``), so copies share it.
    partitions: frozenset[tuple[str, int]] = NO_PARTITIONS
    start_ms: int = -1
    last_update_ms: int = 0
    pending: bool = False  # a change is being made durable
    tv2: bool = False
    # TV2 epoch exhaustion: the producer id the client continues with after this transaction.
    next_producer_id: int = -1
    waiting: list | None = None  # requests queued behind the pending change (None: none)

    def prepare_transition(self, state: TransactionState) -> "TransactionMetadata":
        """The next metadata, in ``state``, for the caller to fill in and make durable; this one
        is unchanged. (The group coordinator's ``Group.transition`` changes the group at once;
        a transaction changes only once its record is durable, so the move is prepared on a
        copy, as Kafka's ``prepareTransitionTo`` does.) Raises
        :class:`~oncelog.state_machine.IllegalStateTransition` for a move the table forbids."""
        check_transition(TRANSITIONS, f"transaction {self.transactional_id!r}", self.state, state)
        new = self.copy()
        new.state = state
        return new

    def copy(self) -> "TransactionMetadata":
        """The metadata without the in-memory fields (not pending, nothing waiting)."""
        return TransactionMetadata(self.transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms,
                                   self.state, self.last_producer_id, self.last_producer_epoch, self.partitions,
                                   self.start_ms, self.last_update_ms, False, self.tv2, self.next_producer_id)
