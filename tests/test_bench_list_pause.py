"""``python -m bench list-pause`` (bench/list_pause.py) small, against a real oncelog broker it
starts: more ids than one chunk of apis/list_transactions are listed whole, every time, while a
probe in another process keeps being answered. No timing is asserted."""

from __future__ import annotations

import asyncio
import os

import pytest

from bench import list_pause
from bench.txnids import create_ids
from oncelog.apis.list_transactions import CHUNK
from oncelog.process import BrokerProcess

pytestmark = pytest.mark.e2e


def test_a_listing_of_more_than_a_chunk_lists_every_id_while_the_probe_is_answered(tmp_path):
    ids = CHUNK * 2 + 17
    broker = BrokerProcess(os.path.join(tmp_path, "broker"), fsync="never").start()
    try:
        asyncio.run(create_ids(broker.bootstrap, "listed", ids, committed=0, partitions=1, connections=8,
                               in_flight=4))
        rows = list_pause.measure(broker.bootstrap, 2)
    finally:
        broker.kill()
    assert [r["ids"] for r in rows] == [ids, ids]
    assert all(r["answers_during"] >= 1 and r["slowest_answer_s"] is not None for r in rows), rows
