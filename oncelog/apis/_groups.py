"""What the group APIs share: the edge where the group coordinator's domain errors (results,
``respond`` answers, raised checks; see :mod:`oncelog.groups.coordinator`) become wire error
codes, through the one table in :mod:`oncelog.errors`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors


def error_code(error: errors.KafkaError | None) -> ErrorCode:
    """The wire code of a group coordinator answer: None is NONE; a write to
    ``__consumer_offsets`` that failed (KafkaStorageError: a full disk) is NOT_COORDINATOR, as
    Kafka's coordinator runtime answers a KAFKA_STORAGE_ERROR of its log
    (CoordinatorOperationExceptionHelper): the client looks the coordinator up again and retries."""
    if isinstance(error, errors.KafkaStorageError):
        return ErrorCode.not_coordinator
    return errors.error_code_for(error)


def error_message(error: errors.KafkaError | None) -> str | None:
    """For ``error_message`` fields: the error's message, None on success."""
    return None if error is None else str(error)
