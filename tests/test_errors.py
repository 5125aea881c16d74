"""The one table from domain errors to wire codes, with the one version-dependent choice."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from oncelog import errors

PRODUCE, ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID = 0, 24, 26, 22


def test_domain_errors_map_to_their_codes_and_anything_else_is_unknown():
    assert errors.error_code_for(errors.OffsetOutOfRangeError("x")) is ErrorCode.offset_out_of_range
    assert errors.error_code_for(errors.KafkaStorageError("x")) is ErrorCode.kafka_storage_error
    assert errors.error_code_for(ValueError("x")) is ErrorCode.unknown_server_error


@pytest.mark.parametrize("api_key, version, code", [
    (PRODUCE, 12, ErrorCode.invalid_producer_epoch),  # Produce never answers PRODUCER_FENCED
    (ADD_PARTITIONS_TO_TXN, 1, ErrorCode.invalid_producer_epoch),
    (ADD_PARTITIONS_TO_TXN, 2, ErrorCode.producer_fenced),
    (END_TXN, 0, ErrorCode.invalid_producer_epoch),
    (END_TXN, 5, ErrorCode.producer_fenced),
    (INIT_PRODUCER_ID, 0, ErrorCode.producer_fenced),  # not in the table: as ERROR_CODES says
    (None, 0, ErrorCode.producer_fenced),
])
def test_producer_fenced_is_answered_by_request_version(api_key, version, code):
    assert errors.error_code_for(errors.ProducerFenced("epoch 3 < 4"), api_key, version) is code
    assert errors.error_code_for(errors.InvalidProducerEpoch("x"), api_key, version) is ErrorCode.invalid_producer_epoch
