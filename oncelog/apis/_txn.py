"""What the transaction APIs share: the edge where the transaction coordinator's domain errors
become wire error codes (the futures they answer through: :func:`._base.reply_later`)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors

# PRODUCER_FENCED exists for newer request versions; older clients expect INVALID_PRODUCER_EPOCH
# for the same condition (as Kafka answers them). API key -> first version answered
# PRODUCER_FENCED. InitProducerId is not listed: it answers PRODUCER_FENCED at every version,
# as oncelog always has.
PRODUCER_FENCED_SINCE: dict[int, int] = {
    24: 2,  # AddPartitionsToTxn
    25: 2,  # AddOffsetsToTxn
    26: 2,  # EndTxn
    28: 2,  # TxnOffsetCommit
}


# WriteTxnMarkers answers for the partitions it wrote to, not for a coordinator's log: a failed
# marker write is KAFKA_STORAGE_ERROR there, as Kafka's ReplicaManager answers it.
WRITE_TXN_MARKERS = 27


def error_code(error: errors.KafkaError | None, api_key: int, api_version: int) -> ErrorCode:
    """The wire code for a transaction coordinator's answer: None is NONE, a domain error maps
    through :data:`oncelog.errors.ERROR_CODES`, except ProducerFenced for request versions older
    than :data:`PRODUCER_FENCED_SINCE` says, and a failed write to the coordinator's log
    (KafkaStorageError: a full disk), which is NOT_COORDINATOR, as Kafka's
    TransactionStateManager (and the group coordinator, for TxnOffsetCommit) answers a
    KAFKA_STORAGE_ERROR of its log: the client finds the coordinator again and retries."""
    if error is None:
        return ErrorCode.none
    if isinstance(error, errors.ProducerFenced) and api_version < PRODUCER_FENCED_SINCE.get(api_key, 0):
        return ErrorCode.invalid_producer_epoch
    if isinstance(error, errors.KafkaStorageError) and api_key != WRITE_TXN_MARKERS:
        return ErrorCode.not_coordinator
    return errors.error_code_for(error)


def producer_answer(outcome, api_key: int, api_version: int) -> tuple[ErrorCode, int, int]:
    """(error code, producer id, producer epoch) for InitProducerId's and EndTxn's answer: a
    :class:`~oncelog.txn.coordinator.ProducerIdAndEpoch` or a domain error."""
    if isinstance(outcome, errors.KafkaError):
        return error_code(outcome, api_key, api_version), -1, -1
    return ErrorCode.none, outcome.producer_id, outcome.producer_epoch
