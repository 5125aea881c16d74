"""What a scrape reads from the broker's state (logs, partitions, groups, transactions, lag) —
built at scrape time on the broker's event loop thread, never on the hot path.

Contract: :func:`collect` takes the running :class:`oncelog.broker.Broker` and returns
prometheus_client metric families (``prometheus_client.core.*MetricFamily``). It must not block
(no I/O beyond what the broker keeps in memory), must cost O(what it reports), and must not raise
for a broker in any state (a partition being deleted, a group mid-rebalance, a broker not yet
opened): each section is built on its own, and one that fails is left out of the scrape (logged
at DEBUG) while the others are still reported.

Names, as jmx_exporter renders Kafka's MBeans (lower-cased ``domain_type_name``, the other keys as
labels), or as kafka_exporter (danielqsj) names consumer lag; what Kafka has not is ``oncelog_``:

* per partition kept here (labels ``topic``, ``partition``; internal topics included, as Kafka):
  ``kafka_log_log_size`` (bytes of its segments), ``kafka_log_log_logstartoffset``,
  ``kafka_log_log_logendoffset``, ``kafka_log_log_numlogsegments``,
  ``kafka_cluster_partition_laststableoffsetlag`` (high watermark minus last stable offset: what
  open transactions hold back from read_committed readers), ``oncelog_partition_high_watermark``,
  ``oncelog_partition_last_stable_offset``;
* ``kafka_server_replicamanager_partitioncount`` / ``_leadercount`` (a node keeps only the
  partitions it leads, so both count the logs here) and ``_produceridcount`` (producer ids in
  the partitions' producer state);
* groups (Kafka 4.x's ``kafka.server:type=group-coordinator-metrics``):
  ``kafka_server_group_coordinator_metrics_group_count{protocol}`` (classic, consumer, share,
  streams), ``..._classic_group_count{state}``, ``..._consumer_group_count{state}``,
  ``..._share_group_count{state}``, ``..._streams_group_count{state}`` (states as Kafka names
  them: ``Stable``, ``PreparingRebalance``, ``NotReady``...), ``..._offset_count`` (committed
  offsets kept), and ``..._group_completed_rebalance_count`` and
  ``..._consumer_group_rebalance_count`` (Kafka's ``-count`` attributes, gauges as jmx_exporter
  gives them, though they only grow);
* transactions: ``oncelog_transactions{state}`` (the open ones by coordinator state: Ongoing,
  PrepareCommit, PrepareAbort, PrepareEpochFence; the idle ids are not walked, so a million of
  them cost nothing here: ``oncelog_transactional_ids`` counts every id known),
  ``oncelog_transaction_oldest_open_seconds`` (0 when none is open), the counter
  ``oncelog_transaction_timed_out`` (aborted for exceeding transaction.timeout.ms);
* consumer lag, per committed offset of a group this node coordinates (classic, consumer and
  streams groups; share groups have no committed offsets): ``kafka_consumergroup_current_offset``
  (the committed offset), ``kafka_consumergroup_lag`` (high watermark minus committed: what
  ListOffsets LATEST answers, which is kafka_exporter's "newest offset"; -1 for a committed
  offset of -1, as kafka_exporter), ``oncelog_consumergroup_lag_stable`` (last stable offset
  minus committed, at least 0: what a read_committed reader of the group can still read now),
  ``kafka_consumergroup_lag_sum`` and ``kafka_consumergroup_current_offset_sum`` per group and
  topic, ``kafka_consumergroup_members``.

On a cluster each node reports its own partitions and the groups and transactional ids it
coordinates, so series of different nodes do not overlap and sums across nodes are right. A
group's coordinator is not always the leader of the partitions it committed offsets for: lag
(and the stable lag) is reported only for a partition whose log is on this node; elsewhere only
``kafka_consumergroup_current_offset`` is, and the node leading the partition does not know the
group's offset. Lag sums add only the partitions reported.
"""

from __future__ import annotations

import logging
from collections import Counter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.samples import Sample

log = logging.getLogger("oncelog.metrics")

PARTITION = ("topic", "partition")
LAG = ("consumergroup", "topic", "partition")
GROUP_METRICS = "kafka_server_group_coordinator_metrics"
# Kafka's state names of each group type, every one reported (0 included) so that a dashboard's
# series exist before the first group is in that state.
CLASSIC_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
SHARE_STATES = ("Empty", "Stable", "Dead")
STREAMS_STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead")
OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def collect(broker) -> list:
    families: list = []
    for section in (_partitions, _groups, _transactions, _lag):
        try:
            families.extend(section(broker))
        except Exception:  # noqa: BLE001 — a scrape reports what it can (module docstring)
            log.debug("metrics: section %s failed; left out of this scrape", section.__name__, exc_info=True)
    return families


def _partition_state(broker, plog):
    """The Partition over ``plog`` if it was opened; never opens one (that reads files)."""
    opened = getattr(broker.partitions, "_partitions", None)
    return opened.get(plog) if opened is not None else None


def _last_stable_offset(broker, plog) -> int:
    partition = _partition_state(broker, plog)
    # An unopened partition has had no write since the start (writes open it), so no open
    # transaction: its LSO is its high watermark.
    return partition.last_stable_offset() if partition is not None else plog.high_watermark


# ---------------------------------------------------------------------- logs and partitions

def _partitions(broker) -> list:
    def gauge(name, doc):
        return GaugeMetricFamily(name, doc, labels=PARTITION)

    size = gauge("kafka_log_log_size", "Bytes of the partition's log segments (kafka.log:type=Log,name=Size)")
    start = gauge("kafka_log_log_logstartoffset",
                  "The partition's log start offset (kafka.log:type=Log,name=LogStartOffset)")
    end = gauge("kafka_log_log_logendoffset", "The partition's log end offset (kafka.log:type=Log,name=LogEndOffset)")
    segments = gauge("kafka_log_log_numlogsegments",
                     "Segments of the partition's log (kafka.log:type=Log,name=NumLogSegments)")
    lso_lag = gauge("kafka_cluster_partition_laststableoffsetlag",
                    "High watermark minus last stable offset: what open transactions hold back from "
                    "read_committed readers (kafka.cluster:type=Partition,name=LastStableOffsetLag)")
    hw = gauge("oncelog_partition_high_watermark", "The partition's high watermark: what consumers may read")
    lso = gauge("oncelog_partition_last_stable_offset",
                "The partition's last stable offset: what read_committed consumers may read")
    count = producers = 0
    # Seven samples per partition, ~8,000 for 1,000 partitions: built as Samples sharing one
    # labels dict per partition (what add_metric would build seven times over; the exposition
    # writes each distinct label set once per scrape).
    series = [(f.name, f.samples.append) for f in (size, start, end, segments, lso_lag, hw, lso)]
    for plog in broker.logs.all_logs():
        if plog.deleted:
            continue
        try:
            labels = {"topic": plog.topic, "partition": str(plog.partition)}
            partition = _partition_state(broker, plog)
            high = plog.high_watermark
            stable = partition.last_stable_offset() if partition is not None else high
            values = (plog.size_bytes, plog.log_start_offset, plog.log_end_offset, len(plog.segments),
                      high - stable, high, stable)
            for (name, append), value in zip(series, values):
                append(Sample(name, labels, value))
            count += 1
            if partition is not None:
                producers += len(partition.producers.producers)
        except Exception:  # noqa: BLE001 — one odd partition does not hide the others
            log.debug("metrics: partition %s-%s skipped", plog.topic, plog.partition, exc_info=True)
    partition_count = GaugeMetricFamily(
        "kafka_server_replicamanager_partitioncount",
        "Partitions on this node (kafka.server:type=ReplicaManager,name=PartitionCount)")
    partition_count.add_metric((), count)
    # A node keeps a partition only if it leads it (one replica per partition): every one is led here.
    leader_count = GaugeMetricFamily("kafka_server_replicamanager_leadercount",
                                     "Partitions this node leads (kafka.server:type=ReplicaManager,name=LeaderCount)")
    leader_count.add_metric((), count)
    producer_ids = GaugeMetricFamily("kafka_server_replicamanager_produceridcount",
                                     "Producer ids in the producer state of this node's partitions, summed over "
                                     "partitions (kafka.server:type=ReplicaManager,name=ProducerIdCount)")
    producer_ids.add_metric((), producers)
    # One replica per partition, min.insync.replicas capped at it (as Kafka's effective minimum):
    # never under-replicated nor under min ISR. Served as Kafka serves them, so the usual alerts
    # (UnderReplicatedPartitions > 0) read a true 0 rather than a missing series.
    under_replicated = GaugeMetricFamily(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Partitions with fewer in-sync replicas than replicas: 0, one replica each "
        "(kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions)")
    under_replicated.add_metric((), 0)
    under_min_isr = GaugeMetricFamily(
        "kafka_server_replicamanager_underminisrpartitioncount",
        "Partitions under min.insync.replicas: 0, min.insync.replicas is capped at the one replica "
        "(kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount)")
    under_min_isr.add_metric((), 0)
    controller = GaugeMetricFamily(
        "kafka_controller_kafkacontroller_activecontrollercount",
        "1 on the node that is the controller (one node alone, node 1 of a cluster), else 0 "
        "(kafka.controller:type=KafkaController,name=ActiveControllerCount)")
    controller.add_metric((), 1 if broker.placement.is_controller else 0)
    return [size, start, end, segments, lso_lag, hw, lso, partition_count, leader_count, producer_ids,
            under_replicated, under_min_isr, controller]


# ---------------------------------------------------------------------- groups

def _groups(broker) -> list:
    coordinator = broker.groups
    if coordinator is None:
        return []
    by_type: dict[str, Counter] = {"classic": Counter(), "consumer": Counter(), "streams": Counter(),
                                   "share": Counter()}
    offsets = 0
    for group in coordinator.groups.values():
        by_type.setdefault(group.group_type, Counter())[group.state.value] += 1
        offsets += len(group.offsets)
    share = getattr(broker, "share", None)
    if share is not None:
        for group_id in share.group_ids():
            group = share.groups.groups.get(group_id)
            # A share group known only by its share partitions' state has no member: Empty.
            by_type["share"][group.state.value if group is not None else "Empty"] += 1
    total = GaugeMetricFamily(f"{GROUP_METRICS}_group_count",
                              "Groups by protocol (group-coordinator-metrics group-count)", labels=("protocol",))
    for protocol, states in by_type.items():
        total.add_metric((protocol,), sum(states.values()))
    families = [total]
    for protocol, known in (("classic", CLASSIC_STATES), ("consumer", CONSUMER_STATES), ("share", SHARE_STATES),
                            ("streams", STREAMS_STATES)):
        fam = GaugeMetricFamily(f"{GROUP_METRICS}_{protocol}_group_count",
                                f"{protocol.capitalize()} groups by state "
                                f"(group-coordinator-metrics {protocol}-group-count)", labels=("state",))
        states = by_type[protocol]
        for state in (*known, *sorted(set(states) - set(known))):
            fam.add_metric((state,), states.get(state, 0))
        families.append(fam)
    offset_count = GaugeMetricFamily(f"{GROUP_METRICS}_offset_count",
                                     "Committed offsets kept for classic, consumer and streams groups "
                                     "(group-coordinator-metrics offset-count)")
    offset_count.add_metric((), offsets)
    families.append(offset_count)
    # Kafka's -count attributes, named and typed as jmx_exporter gives them (a gauge ending in
    # _count), so that dashboards written for Kafka find them; they only ever grow.
    completed = GaugeMetricFamily(f"{GROUP_METRICS}_group_completed_rebalance_count",
                                  "Classic group rebalances completed: the leader's assignment stored, the group "
                                  "Stable (group-coordinator-metrics group-completed-rebalance-count)")
    completed.add_metric((), getattr(coordinator, "completed_rebalances", 0))
    consumer = GaugeMetricFamily(f"{GROUP_METRICS}_consumer_group_rebalance_count",
                                 "Consumer group epoch bumps by a heartbeat "
                                 "(group-coordinator-metrics consumer-group-rebalance-count)")
    consumer.add_metric((), getattr(coordinator.consumer, "rebalances", 0))
    return [*families, completed, consumer]


# ---------------------------------------------------------------------- transactions

def _transactions(broker) -> list:
    txn = broker.txn
    if txn is None:
        return []
    now = broker.clock()
    states: Counter = Counter()
    oldest = None
    # Only the open transactions are walked (txn.open), never every transactional id.
    for m in txn.open.values():
        states[m.state.kafka_name] += 1
        if m.start_ms >= 0 and (oldest is None or m.start_ms < oldest):
            oldest = m.start_ms
    by_state = GaugeMetricFamily("oncelog_transactions", "Open transactions by the coordinator's state",
                                 labels=("state",))
    for state in (*OPEN_TXN_STATES, *sorted(set(states) - set(OPEN_TXN_STATES))):
        by_state.add_metric((state,), states.get(state, 0))
    ids = GaugeMetricFamily("oncelog_transactional_ids", "Transactional ids this node's coordinator knows")
    ids.add_metric((), len(txn.txns))
    age = GaugeMetricFamily("oncelog_transaction_oldest_open_seconds",
                            "Age of the oldest open transaction (its first partition added), 0 when none is open")
    age.add_metric((), max(now - oldest, 0) / 1000.0 if oldest is not None else 0.0)
    timed_out = CounterMetricFamily("oncelog_transaction_timed_out",
                                    "Transactions the coordinator aborted for exceeding their timeout")
    timed_out.add_metric((), getattr(txn, "timed_out", 0))
    markers = CounterMetricFamily("oncelog_transaction_markers_written",
                                  "COMMIT and ABORT markers this node appended to its partitions", labels=("result",))
    written = getattr(broker.markers, "written", {True: 0, False: 0})
    markers.add_metric(("COMMIT",), written[True])
    markers.add_metric(("ABORT",), written[False])
    return [by_state, ids, age, timed_out, markers]


# ---------------------------------------------------------------------- consumer lag

def _lag(broker) -> list:
    coordinator = broker.groups
    if coordinator is None:
        return []
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "The group's committed offset of the partition", labels=LAG)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "High watermark minus the group's committed offset (partitions whose log is on "
                            "this node)", labels=LAG)
    stable = GaugeMetricFamily("oncelog_consumergroup_lag_stable",
                               "Last stable offset minus the group's committed offset, at least 0: what a "
                               "read_committed reader can still read (partitions whose log is on this node)",
                               labels=LAG)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "The group's lag summed over the topic's partitions",
                                labels=("consumergroup", "topic"))
    current_sum = GaugeMetricFamily("kafka_consumergroup_current_offset_sum",
                                    "The group's committed offsets summed over the topic's partitions",
                                    labels=("consumergroup", "topic"))
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=("consumergroup",))
    logs = broker.logs
    for group_id, group in coordinator.groups.items():
        members.add_metric((group_id,), len(group.members))
        lags: Counter = Counter()
        committed_sums: Counter = Counter()
        for (topic, index), value in group.offsets.items():
            committed = value.offset
            labels = (group_id, topic, str(index))
            current.add_metric(labels, committed)
            committed_sums[topic] += committed
            plog = logs.get_log(topic, index)
            if plog is None or plog.deleted:
                continue  # the partition's log is on another node (or gone): its end is not known here
            if committed < 0:
                lag.add_metric(labels, -1)  # kafka_exporter's "no offset" (not summed)
                continue
            behind = plog.high_watermark - committed
            lag.add_metric(labels, behind)
            stable.add_metric(labels, max(_last_stable_offset(broker, plog) - committed, 0))
            lags[topic] += behind
        for topic, total in committed_sums.items():
            current_sum.add_metric((group_id, topic), total)
        for topic, total in lags.items():
            lag_sum.add_metric((group_id, topic), total)
    return [current, lag, stable, lag_sum, current_sum, members]
