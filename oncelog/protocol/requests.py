"""Kafka requests out and their answers back, as bytes: what any party sending requests needs
(the project's protocol client, and a cluster's nodes talking to each other, oncelog.cluster).
No I/O."""

from __future__ import annotations

import struct

from kio.index import load_payload_module
from kio.serial.errors import OutOfBoundValue
from kio.static.constants import EntityType

from . import codec, guard
from .timestamps import decode_with_negative_timestamps


def request_module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.request)


def write_request(out, request, correlation_id: int, client_id: str) -> None:
    """Write header and body of a kio request (no size prefix) to the stream ``out``."""
    cls = type(request)
    header_cls = cls.__header_schema__
    header = header_cls(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                        correlation_id=correlation_id, client_id=client_id)
    codec.writer(header_cls)(out, header)
    codec.writer(cls)(out, request)


def decode_response(raw: bytes, request_cls) -> tuple[int, object]:
    """(correlation id, response) of a response frame (without its size prefix) to a request
    of class ``request_cls``.

    A ``datetime_i64`` field holding -1 (Kafka's "no time", e.g. DescribeTransactions'
    ``transaction_start_time`` of an Empty transactional id) decodes as ``None``, and unknown
    tagged fields are skipped: kio refuses both, so the frame is then decoded again through
    :func:`..protocol.timestamps.decode_with_negative_timestamps` (the slow path, taken only after
    kio refused; if that fails too, kio's own error is raised). Before kio, the frame is walked by
    :func:`..protocol.guard.check_response`: a count or length the frame cannot hold is a
    :class:`..protocol.codec.DecodeError` (a ValueError) instead of kio's process abort.
    """
    resp_cls = codec.response_class(request_cls.__api_key__, request_cls.__version__)
    try:
        guard.check_response(resp_cls, raw)  # kio would abort the process on a huge array count
    except guard.Refused as exc:
        raise codec.DecodeError(f"response to {request_cls.__name__} v{request_cls.__version__}: {exc}") from None
    correlation_id = struct.unpack_from(">i", raw)[0]
    offset = 4 if resp_cls.__header_schema__.__version__ == 0 else 5
    read = codec.reader(resp_cls)
    try:
        return correlation_id, read(raw, offset)[0]
    except (OutOfBoundValue, KeyError) as refused:
        try:
            return correlation_id, decode_with_negative_timestamps(resp_cls, read, raw, offset)
        except Exception:
            raise refused from None
