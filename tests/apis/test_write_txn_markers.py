"""WriteTxnMarkers (key 27) when the log refuses a marker (a full disk): the request is answered,
every partition of that marker KAFKA_STORAGE_ERROR, instead of the connection being closed; the
same request succeeds once the log takes writes again. The refusal is the partition's own
KafkaStorageError, raised here by replacing its ``append_marker`` for one call (a full disk in
process; tests/chaos/test_disk_full.py has the real one)."""

from __future__ import annotations

from oncelog import errors

from .harness import E, request_module, run


def _markers(pid: int, epoch: int):
    m = request_module(27, 1)
    return m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        topics=(m.WritableTxnMarkerTopic(name="t", partition_indexes=(0,)),)),))


def _codes(resp) -> list:
    return [p.error_code for marker in resp.markers for t in marker.topics for p in t.partitions]


def test_a_marker_the_log_refuses_is_answered_kafka_storage_error_then_written_when_it_can(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        partition = api.partition("t")
        real = partition.append_marker

        def full_disk(*args, **kwargs):
            raise errors.KafkaStorageError("no space left on device (test)")

        partition.append_marker = full_disk
        resp = await api.call(27, 1, _markers(1000, 0))
        assert _codes(resp) == [E.kafka_storage_error]
        end = api.log_end("t")
        partition.append_marker = real
        resp = await api.call(27, 1, _markers(1000, 0))
        assert _codes(resp) == [E.none]
        assert api.log_end("t") == end + 1  # the marker, once

    run(tmp_path, scenario)
