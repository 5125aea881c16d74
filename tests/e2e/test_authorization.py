"""ACLs enforced on a real broker process, on a PLAINTEXT listener with Kafka's
StandardAuthorizer named: the forged-marker scenario of the issue — a client writing a COMMIT
marker into another producer's open transaction with WriteTxnMarkers — is refused with
CLUSTER_AUTHORIZATION_FAILED, nothing is written, and the owner's abort still hides the
transaction's records from read_committed readers.

The client is ``User:ANONYMOUS`` (PLAINTEXT). ``allow.everyone.if.no.acl.found=true`` lets it
produce transactionally (no ACL on its topic or transactional id), while one ACL on the cluster
resource (CLUSTER_ACTION for ``User:admin``) means the cluster does have ACLs, none for it: a
normal user that may write, not a broker."""

from __future__ import annotations

import datetime
import time

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, list_offsets_latest, request_module
from oncelog.protocol import records as rb
from tests.apis.harness import committed_view

pytestmark = pytest.mark.e2e  # starts processes

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, TXN_ID = "payments", "owner-txn"


def _create_topic(client: RawClient) -> None:
    m = request_module(19, 5)
    resp = client.request(m.CreateTopicsRequest(
        topics=(m.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=10), validate_only=False))
    assert resp.topics[0].error_code == ErrorCode.none, resp


def _create_acl_cluster_action_for_admin(client: RawClient) -> None:
    m = request_module(30, 3)
    resp = client.request(m.CreateAclsRequest(creations=(m.AclCreation(
        resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3, principal="User:admin", host="*",
        operation=9, permission_type=3),)))
    assert resp.results[0].error_code == ErrorCode.none, resp


def _fetch_committed(client: RawClient):
    m = request_module(1, 12)
    resp = client.request(m.FetchRequest(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, isolation_level=1,
        session_id=0, session_epoch=-1, topics=(m.FetchTopic(topic=TOPIC, partitions=(m.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),), forgotten_topics_data=(), rack_id=""))
    return resp.responses[0].partitions[0]


def test_a_forged_commit_marker_is_refused_and_the_owners_abort_holds(broker_factory):
    broker = broker_factory(extra_args=[
        "--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "--override", "super.users=User:admin",
        "--override", "allow.everyone.if.no.acl.found=true"])
    owner, forger = RawClient(broker.bootstrap), RawClient(broker.bootstrap)
    try:
        _create_topic(owner)
        _create_acl_cluster_action_for_admin(owner)
        # The owner opens a transaction and writes into it.
        ip = request_module(22, 4)
        init = owner.request(ip.InitProducerIdRequest(transactional_id=TXN_ID,
                                                      transaction_timeout=datetime.timedelta(seconds=60),
                                                      producer_id=-1, producer_epoch=-1))
        assert init.error_code == ErrorCode.none, init
        pid, epoch = init.producer_id, init.producer_epoch
        ap = request_module(24, 3)
        added = owner.request(ap.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(ap.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),)))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
        pm = request_module(0, 9)
        records = rb.build_batch([(b"k", b"uncommitted")], timestamp_ms=0, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL)
        produced = owner.request(pm.ProduceRequest(
            transactional_id=TXN_ID, acks=-1, timeout=datetime.timedelta(seconds=10), topic_data=(
                pm.TopicProduceData(name=TOPIC, partition_data=(pm.PartitionProduceData(index=0, records=records),)),)))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none, produced
        end_before = list_offsets_latest(forger, TOPIC)

        # The forger, a normal user, writes a COMMIT marker into the owner's transaction.
        wm = request_module(27, 1)
        forged = forger.request(wm.WriteTxnMarkersRequest(markers=(wm.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=0,
            topics=(wm.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),)),)))
        [result] = forged.markers
        assert [p.error_code for t in result.topics for p in t.partitions] == [
            ErrorCode.cluster_authorization_failed]
        assert list_offsets_latest(forger, TOPIC) == end_before  # no marker written

        # The owner aborts: its record never becomes visible to read_committed readers.
        em = request_module(26, 3)
        ended = owner.request(em.EndTxnRequest(transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch,
                                               committed=False))
        assert ended.error_code == ErrorCode.none, ended
        # The ABORT marker is written after EndTxn answers (Kafka's order too) and the HW passes
        # it only once it is fsynced (--fsync always): on a loaded machine that can take longer
        # than a burst of fetches (200 in a row once did not see it), so wait by the clock.
        deadline = time.monotonic() + 30
        while True:
            p = _fetch_committed(forger)
            if p.last_stable_offset == p.high_watermark == end_before + 1 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert p.last_stable_offset == p.high_watermark == end_before + 1, p
        assert committed_view(p) == []
    finally:
        owner.close()
        forger.close()
