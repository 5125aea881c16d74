"""Helpers shared by the transaction APIs."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode


def fenced_code(api_version: int, first_version_with_producer_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED exists for newer request versions; older clients expect
    INVALID_PRODUCER_EPOCH for the same condition (as Kafka answers them)."""
    return ErrorCode.producer_fenced if api_version >= first_version_with_producer_fenced else ErrorCode.invalid_producer_epoch


def future():
    return asyncio.get_running_loop().create_future()


def resolve(fut, value) -> None:
    if not fut.done():
        fut.set_result(value)
