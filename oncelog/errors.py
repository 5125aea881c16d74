"""Domain errors, and the one table that maps them to Kafka wire error codes.

Code inside the broker raises these; only API handlers (at the protocol edge) turn them into
``ErrorCode`` values with :func:`error_code_for`. Each carries a message naming what was wrong,
which handlers put into ``error_message`` fields where the protocol version has them.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """Base of errors that have a Kafka error code. ``record_errors``: Produce's per-record
    errors (KIP-467), (index of the record in its batch, message)."""

    record_errors: tuple[tuple[int, str], ...] = ()


class UnknownTopicOrPartition(KafkaError): ...
class UnknownTopicId(KafkaError): ...
class InvalidTopic(KafkaError): ...
class TopicAlreadyExists(KafkaError): ...
class InvalidPartitions(KafkaError): ...
class InvalidReplicationFactor(KafkaError): ...
class InvalidConfig(KafkaError): ...
class CorruptMessage(KafkaError): ...
class InvalidRecord(KafkaError): ...
class MessageTooLarge(KafkaError): ...
class OffsetOutOfRangeError(KafkaError): ...
class KafkaStorageError(KafkaError): ...
class InvalidRequiredAcks(KafkaError): ...
class InvalidRequest(KafkaError): ...
class PolicyViolation(KafkaError): ...
class OutOfOrderSequence(KafkaError): ...
class InvalidProducerEpoch(KafkaError): ...
class UnknownProducerId(KafkaError): ...
class ProducerFenced(KafkaError): ...
class InvalidProducerIdMapping(KafkaError): ...
class InvalidTxnState(KafkaError): ...
class ConcurrentTransactions(KafkaError): ...
class InvalidTransactionTimeout(KafkaError): ...
class TransactionalIdNotFound(KafkaError): ...
class InvalidReplicaAssignment(KafkaError): ...
class NotEnoughReplicas(KafkaError): ...
class InvalidTimestamp(KafkaError): ...
class TransactionalIdAuthorizationFailed(KafkaError): ...


ERROR_CODES: dict[type[KafkaError], ErrorCode] = {
    UnknownTopicOrPartition: ErrorCode.unknown_topic_or_partition,
    UnknownTopicId: ErrorCode.unknown_topic_id,
    InvalidTopic: ErrorCode.invalid_topic_exception,
    TopicAlreadyExists: ErrorCode.topic_already_exists,
    InvalidPartitions: ErrorCode.invalid_partitions,
    InvalidReplicationFactor: ErrorCode.invalid_replication_factor,
    InvalidConfig: ErrorCode.invalid_config,
    CorruptMessage: ErrorCode.corrupt_message,
    InvalidRecord: ErrorCode.invalid_record,
    MessageTooLarge: ErrorCode.message_too_large,
    OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    KafkaStorageError: ErrorCode.kafka_storage_error,
    InvalidRequiredAcks: ErrorCode.invalid_required_acks,
    InvalidRequest: ErrorCode.invalid_request,
    PolicyViolation: ErrorCode.policy_violation,
    OutOfOrderSequence: ErrorCode.out_of_order_sequence_number,
    InvalidProducerEpoch: ErrorCode.invalid_producer_epoch,
    UnknownProducerId: ErrorCode.unknown_producer_id,
    ProducerFenced: ErrorCode.producer_fenced,
    InvalidProducerIdMapping: ErrorCode.invalid_producer_id_mapping,
    InvalidTxnState: ErrorCode.invalid_txn_state,
    TransactionalIdAuthorizationFailed: ErrorCode.transactional_id_authorization_failed,
    ConcurrentTransactions: ErrorCode.concurrent_transactions,
    InvalidTransactionTimeout: ErrorCode.invalid_transaction_timeout,
    TransactionalIdNotFound: ErrorCode.transactional_id_not_found,
    InvalidReplicaAssignment: ErrorCode.invalid_replica_assignment,
    NotEnoughReplicas: ErrorCode.not_enough_replicas,
    InvalidTimestamp: ErrorCode.invalid_timestamp,
}

_BY_CODE = {code: cls for cls, code in ERROR_CODES.items()}


def error_for_code(code: ErrorCode, message: str) -> KafkaError:
    """The domain error for a code a coordinator answered with."""
    return _BY_CODE.get(code, KafkaError)(message)


def error_code_for(exc: BaseException) -> ErrorCode:
    for cls in type(exc).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.unknown_server_error
