"""Kafka's default partitioner for keyed records, vectorised: ``toPositive(murmur2(key)) %
numPartitions``, bit for bit as the Java client's ``Utils.murmur2`` (so a key lands where a
Java, kafka-python or Spark producer would put it). Sans-IO.

Keys are hashed in groups of equal length, each group as a 2-D byte array processed four bytes
(one murmur2 block) at a time for all its keys at once.
"""

from __future__ import annotations

import numpy as np

_M = np.uint32(0x5BD1E995)
_SEED = 0x9747B28C


def murmur2(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """murmur2 (as int32) of the byte strings ``data[starts[i]:starts[i]+lengths[i]]``."""
    out = np.zeros(len(starts), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths):
            rows = np.nonzero(lengths == length)[0]
            length = int(length)
            block = data[starts[rows][:, None] + np.arange(length)] if length else np.empty((len(rows), 0), np.uint8)
            h = np.full(len(rows), (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
            for i in range(length // 4):
                b = block[:, 4 * i : 4 * i + 4].astype(np.uint32)
                k = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)
                k = k * _M
                k ^= k >> np.uint32(24)
                k = k * _M
                h = h * _M
                h ^= k
            tail = length & ~3
            rest = length % 4
            if rest == 3:
                h ^= block[:, tail + 2].astype(np.uint32) << 16
            if rest >= 2:
                h ^= block[:, tail + 1].astype(np.uint32) << 8
            if rest >= 1:
                h ^= block[:, tail].astype(np.uint32)
                h = h * _M
            h ^= h >> np.uint32(13)
            h = h * _M
            h ^= h >> np.uint32(15)
            out[rows] = h
    return out.view(np.int32)


def partitions_for_keys(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, num_partitions: int) -> np.ndarray:
    """Kafka's partition for each key (lengths >= 0; null keys are the caller's business)."""
    h = murmur2(data, starts, lengths)
    return (h.view(np.uint32) & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
