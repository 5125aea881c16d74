"""What the group APIs share: the edge where the group coordinator's domain errors (results,
``respond`` answers, raised checks; see :mod:`oncelog.groups.coordinator`) become wire error
codes, through the one table in :mod:`oncelog.errors`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors


def error_code(error: errors.KafkaError | None) -> ErrorCode:
    """The wire code of a group coordinator answer: None is NONE."""
    return errors.error_code_for(error)


def error_message(error: errors.KafkaError | None) -> str | None:
    """For ``error_message`` fields: the error's message, None on success."""
    return None if error is None else str(error)
