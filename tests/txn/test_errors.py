"""The edge where the coordinator's domain errors become wire codes (``oncelog.apis._txn``):
one table, and PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH to request versions that
predate it."""

from __future__ import annotations

import pytest

from oncelog import errors
from oncelog.apis import (add_offsets_to_txn, add_partitions_to_txn, end_txn, init_producer_id, txn_offset_commit,
                          write_txn_markers)
from oncelog.apis._txn import PRODUCER_FENCED_SINCE, error_code, producer_answer
from oncelog.txn.coordinator import ProducerIdAndEpoch

from .harness import E


@pytest.mark.parametrize("api", [add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit])
def test_producer_fenced_by_request_version(api):
    fenced = errors.ProducerFenced("x")
    assert PRODUCER_FENCED_SINCE[api.API_KEY] == 2
    assert error_code(fenced, api.API_KEY, 0) == error_code(fenced, api.API_KEY, 1) == E.invalid_producer_epoch
    for version in range(2, api.MAX_VERSION + 1):
        assert error_code(fenced, api.API_KEY, version) == E.producer_fenced


def test_init_producer_id_answers_producer_fenced_at_every_version():
    for version in range(init_producer_id.MIN_VERSION, init_producer_id.MAX_VERSION + 1):
        assert error_code(errors.ProducerFenced("x"), init_producer_id.API_KEY, version) == E.producer_fenced


@pytest.mark.parametrize("error,code", [
    (None, E.none),
    (errors.InvalidProducerEpoch("x"), E.invalid_producer_epoch),
    (errors.InvalidProducerIdMapping("x"), E.invalid_producer_id_mapping),
    (errors.InvalidTxnState("x"), E.invalid_txn_state),
    (errors.ConcurrentTransactions("x"), E.concurrent_transactions),
    (errors.InvalidTransactionTimeout("x"), E.invalid_transaction_timeout),
    (errors.TransactionalIdNotFound("x"), E.transactional_id_not_found),
    (errors.InvalidRequest("x"), E.invalid_request),
    (errors.KafkaStorageError("x"), E.not_coordinator),
])
def test_domain_errors_map_to_their_codes_at_every_version(error, code):
    for version in range(6):
        assert error_code(error, end_txn.API_KEY, version) == code


@pytest.mark.parametrize("api", [init_producer_id, add_partitions_to_txn, add_offsets_to_txn, end_txn,
                                 txn_offset_commit])
def test_a_failed_write_to_the_coordinators_log_is_not_coordinator(api):
    """As Kafka's TransactionStateManager (and the group coordinator for TxnOffsetCommit): a
    KAFKA_STORAGE_ERROR of the coordinator's log is answered NOT_COORDINATOR (retriable: the
    client finds the coordinator again and retries); a marker write (WriteTxnMarkers) answers
    for the partition itself: KAFKA_STORAGE_ERROR."""
    assert error_code(errors.KafkaStorageError("full"), api.API_KEY, api.MAX_VERSION) == E.not_coordinator
    assert error_code(errors.KafkaStorageError("full"), write_txn_markers.API_KEY, 1) == E.kafka_storage_error
    assert error_code(errors.CoordinatorLoadInProgress("no id block"), api.API_KEY,
                      api.MAX_VERSION) == E.coordinator_load_in_progress


def test_producer_answer():
    assert producer_answer(ProducerIdAndEpoch(7, 3), end_txn.API_KEY, 5) == (E.none, 7, 3)
    assert producer_answer(errors.ProducerFenced("x"), end_txn.API_KEY, 1) == (E.invalid_producer_epoch, -1, -1)
