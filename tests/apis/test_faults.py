"""The broker's faults (:mod:`oncelog.faults`) used in-process, as franz-go's kfake tests use
``AddFault`` and ``ControlKey``: a test adds a fault to ``broker.faults`` and holds its handle
(``fired()``, ``remove()``, a count budget, 0 = until removed), or intercepts a request kind
with ``Broker.control(api_key, fn)``. ``oncelog serve`` adds the same faults from its
environment (:func:`oncelog.faults.install_from_env`); tests/e2e and tests/chaos run those."""

from __future__ import annotations

import struct

import pytest

from oncelog import faults as f
from oncelog.apis._base import CloseConnection
from oncelog.broker import Broker
from oncelog.config.settings import BrokerConfig
from oncelog.protocol import codec

from .harness import E, batch, records_of, run, settled

T0, T1 = ("t", 0), ("t", 1)


def test_a_fault_fires_on_its_cadence_within_its_budget_and_stops_when_removed():
    faults = f.Faults()
    assert not faults and not faults.fire("p")  # nothing added: nothing fires
    every_other = faults.add("p", every=2)  # 0 = until removed
    assert faults and [faults.fire("p") for _ in range(6)] == [False, True] * 3
    assert every_other.fired() == 3 and every_other.calls == 6
    every_other.remove()
    assert not faults and not faults.fire("p") and not every_other.live
    every_other.remove()  # twice: harmless

    seen = []
    twice = faults.add("q", 2, action=seen.append)
    assert [faults.fire("q") for _ in range(4)] == [True, True, False, False]
    assert seen == ["q", "q"] and twice.fired() == 2 and not twice.live and not faults.armed("q")
    with pytest.raises(ValueError):
        faults.add("q", -1)


def test_the_environment_becomes_faults_only_through_install_from_env():
    faults = f.Faults()
    crash, drop = f.install_from_env(faults, {"ONCELOG_CRASH_POINT": "txn-durable:PrepareCommit",
                                              "ONCELOG_FAULT": "markers:drop:4"})
    assert (crash.point, crash.count, crash.action) == ("txn-durable:PrepareCommit", 1, f.sigkill)
    assert (drop.point, drop.count, drop.every) == ("markers:drop", 0, 4)
    [write] = f.install_from_env(f.Faults(), {"ONCELOG_FAULT": "offsets-txn-write:1000000"})
    assert (write.point, write.count, write.every) == ("offsets-txn-write", 1000000, 1)
    for text, default in (("markers:drop", (0, 3)), ("offsets-txn-write", (1, 1)), ("markers:drop:0", (0, 3))):
        assert [(h.count, h.every) for h in f.install_from_env(f.Faults(), {"ONCELOG_FAULT": text})] == [default]
    assert f.install_from_env(f.Faults(), {"ONCELOG_FAULT": "no-such-fault"}) == []
    assert f.install_from_env(f.Faults(), {}) == []


def _markers(api, tp) -> list[int]:
    log = api.partition(*tp).log
    return [r.control for r in records_of(log.read(0, 1 << 20, log.log_end_offset)) if r.control is not None]


async def _commit_one_record_each(api, txn_id: str) -> None:
    pid, epoch = await api.begin(txn_id, [T0, T1])
    for _, index in (T0, T1):
        assert (await api.produce("t", batch(pid=pid, epoch=epoch, seq=0, transactional=True),
                                  index=index, transactional_id=txn_id)).error_code == E.none
    assert (await api.end_txn(txn_id, pid, epoch, commit=True)).error_code == E.none


def test_markers_drop_with_a_budget_of_one_loses_one_marker_then_the_next_transaction_is_whole(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=2)
        drop = api.broker.faults.add("markers:drop", 1)
        await _commit_one_record_each(api, "a")
        await settled(api, "t", 0)
        assert drop.fired() == 1 and not drop.live  # its budget spent, it removed itself
        assert (_markers(api, T0), _markers(api, T1)) == ([1], [])  # t-1 never saw its COMMIT

        # a fault on a cadence, removed by the test: the first transaction is whole
        other = api.broker.faults.add("markers:drop", every=2)
        await _commit_one_record_each(api, "b")
        await settled(api, "t", 0)
        assert other.fired() == 0 and (_markers(api, T0), _markers(api, T1)) == ([1, 1], [1])
        other.remove()
        await _commit_one_record_each(api, "c")
        await settled(api, "t", 0)
        assert other.fired() == 0 and (_markers(api, T0), _markers(api, T1)) == ([1, 1, 1], [1, 1])

    run(tmp_path, scenario)


def test_offsets_txn_write_fails_the_first_n_writes_and_a_crash_point_runs_its_action(tmp_path):
    async def scenario(api):
        await api.create_topic("in")
        failing = api.broker.faults.add("offsets-txn-write", 2)
        reached = []
        durable = api.broker.faults.add("txn-durable:PrepareCommit", action=reached.append)  # not a SIGKILL here
        pid, epoch = await api.producer("tx")
        assert await api.add_offsets("tx", pid, epoch, "g") == E.none
        for _ in range(2):
            codes = await api.txn_offset_commit("tx", pid, epoch, "g", {("in", 0): 5})
            assert codes[("in", 0)] != E.none
        assert failing.fired() == 2 and not failing.live
        assert await api.txn_offset_commit("tx", pid, epoch, "g", {("in", 0): 5}) == {("in", 0): E.none}
        assert reached == []
        assert (await api.end_txn("tx", pid, epoch, commit=True)).error_code == E.none
        assert reached == ["txn-durable:PrepareCommit"] and durable.fired() == 1
        durable.remove()
        assert not api.broker.faults

    run(tmp_path, scenario)


def _api_versions_v0(correlation_id: int) -> bytes:
    return struct.pack(">hhih", 18, 0, correlation_id, -1)


def _decoded(chunks, version: int = 0):
    raw = b"".join(chunks)
    return codec.reader(codec.response_class(18, version))(raw, 8)[0]


def test_broker_control_answers_or_passes_on_a_request_kind_within_its_budget(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    seen = []

    def passes(ctx, request):  # looks, and lets the handler answer
        seen.append((ctx.api_version, ctx.correlation_id))
        return None

    def refuses(ctx, request):
        return codec.response_class(18, 0)(error_code=E.unsupported_version, api_keys=())

    watch = broker.control(18, passes)
    once = broker.control(18, refuses, count=1)
    assert _decoded(broker.handle_frame(_api_versions_v0(1), "test")).error_code == E.unsupported_version
    assert once.fired() == 1 and not once.live and watch.fired() == 0
    answered = _decoded(broker.handle_frame(_api_versions_v0(2), "test"))
    assert answered.error_code == E.none and any(k.api_key == 18 for k in answered.api_keys)
    assert seen == [(0, 1), (0, 2)] and watch.calls == 2

    # a control function may close the connection instead of answering
    closing = broker.control(18, lambda ctx, request: CloseConnection("a test closes it"))
    assert isinstance(broker.handle_frame(_api_versions_v0(3), "test"), CloseConnection)
    closing.remove()
    watch.remove()
    assert not broker.faults.controls
    assert _decoded(broker.handle_frame(_api_versions_v0(4), "test")).error_code == E.none
    assert seen == [(0, 1), (0, 2), (0, 3)]
