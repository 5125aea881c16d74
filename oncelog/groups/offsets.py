"""Committed offsets of every group, plain and transactional; the group coordinator's offset side
(Kafka's GroupMetadataManager, offsets part). Sans-IO, as the coordinator.

* A commit (OffsetCommit) is made durable through ``persist`` first and only then visible to
  OffsetFetch. Whether a member may commit (its generation, its instance id) is checked by the
  coordinator before (:mod:`oncelog.groups.commit_checks`).
* A transactional commit (TxnOffsetCommit, KIP-98/447) is written by the store as part of the
  producer's transaction and staged here per producer id; its COMMIT marker on
  ``__consumer_offsets`` makes the offsets visible, an ABORT drops them. While one is staged for a
  partition, a ``require_stable`` OffsetFetch of it answers UNSTABLE_OFFSET_COMMIT.
* Deletion (DeleteGroups): an Empty group goes with its offsets; if its tombstones are not
  written, it is put back as it was.
* Retention (KIP-211): an Empty group's offsets expire ``offsets.retention.ms`` after the later of
  their commit and the moment the group became Empty; an Empty group without offsets that stayed
  idle that long is removed (its GroupMetadata tombstoned), as Kafka's cleanupGroupMetadata does.
"""

from __future__ import annotations

import logging
from typing import Callable

from .. import errors
from ..errors import KafkaError
from ..notices import notice
from .records import OffsetKey, OffsetValue, decode_key, encode_key, encode_offset_value
from .state import Group, Persist

log = logging.getLogger("oncelog.groups")

TopicPartition = tuple[str, int]


class GroupOffsets:
    """The offsets of the coordinator's groups (``groups``, shared with it: a commit to an
    unknown group creates a simple, memberless group, as Kafka does)."""

    def __init__(self, groups: dict[str, Group], clock: Callable[[], int], persist: Persist) -> None:
        self.groups = groups
        self.clock = clock
        self.persist = persist
        # Transactional offset commits awaiting their producer's COMMIT/ABORT marker:
        # producer id -> {(group, topic, partition): value}
        self.pending_txn_offsets: dict[int, dict[tuple[str, str, int], OffsetValue]] = {}

    # ------------------------------------------------------------------ committed offsets

    def commit(self, group_id: str, offsets: dict[TopicPartition, OffsetValue],
               on_done: Callable[[KafkaError | None], None]) -> None:
        """Persist then apply validated offsets."""
        records = [(encode_key(OffsetKey(group_id, t, p)), encode_offset_value(v)) for (t, p), v in offsets.items()]

        def stored(err: KafkaError | None) -> None:
            if err is None:
                group = self.groups.get(group_id)
                if group is not None:
                    group.offsets.update(offsets)
            on_done(err)

        self.persist(group_id, records, stored)

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None) -> dict[TopicPartition, OffsetValue | None]:
        group = self.groups.get(group_id)
        offsets = group.offsets if group else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def delete(self, group_id: str, partitions: list[TopicPartition],
               respond: Callable[[KafkaError | None, dict[TopicPartition, KafkaError | None]], None]) -> None:
        """OffsetDelete: answers (the group's error or None, per partition None or its error).
        A non-Empty group's offsets of topics its members subscribe to stay."""
        group = self.groups.get(group_id)
        if group is None or group.is_dead():
            return respond(errors.GroupIdNotFound(f"Group {group_id} not found."), {})
        subscribed = group.subscribed_topics() if not group.is_empty() else set()
        if subscribed is None and not group.is_empty() and group.protocol_type != "consumer":
            return respond(errors.NonEmptyGroup(
                f"group {group_id!r} is {group.state.value} with protocol type {group.protocol_type!r}: its "
                "subscriptions are unknown, so no offsets can be deleted"), {})
        # A consumer group whose subscriptions are unknown (they do not parse) counts as
        # subscribed to every topic (Kafka's ClassicGroup.isSubscribedToTopic).
        results: dict[TopicPartition, KafkaError | None] = {}
        deleted = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                results[tp] = errors.GroupSubscribedToTopic(
                    f"group {group_id!r} is {group.state.value} and its members subscribe to topic {tp[0]!r}")
            else:
                results[tp] = None
                if tp in group.offsets:
                    deleted.append(tp)
        if not deleted:
            return respond(None, results)
        records = [(encode_key(OffsetKey(group_id, t, p)), None) for t, p in deleted]

        def stored(err):
            if err is None:
                for tp in deleted:
                    group.offsets.pop(tp, None)
            respond(err, results)

        self.persist(group_id, records, stored)
        return None

    def load(self, key: OffsetKey, value: OffsetValue | None) -> None:
        """Replay of ``__consumer_offsets``: an offset commit record (None: its tombstone)."""
        group = self.groups.get(key.group)
        if value is None:
            if group is not None:
                group.offsets.pop((key.topic, key.partition), None)
            return
        if group is None:
            group = self.groups[key.group] = Group(key.group)
        group.offsets[(key.topic, key.partition)] = value

    def delete_groups(self, group_ids: list[str], respond: Callable[[dict[str, KafkaError | None]], None]) -> None:
        """DeleteGroups: Empty groups go with their offsets (tombstones of both); answers per group
        id None or the error saying why not."""
        results: dict[str, KafkaError | None] = {}
        records: list[tuple[bytes, bytes | None]] = []
        removed: dict[str, Group] = {}
        now = self.clock()
        for gid in dict.fromkeys(group_ids):  # a repeated id is one group
            group = self.groups.get(gid)
            if group is None or group.is_dead():
                results[gid] = errors.GroupIdNotFound(f"Group {gid} not found.")
            elif not group.is_empty():
                results[gid] = errors.NonEmptyGroup(
                    f"group {gid!r} is {group.state.value} with {len(group.members)} member(s): only Empty groups "
                    "can be deleted")
            else:
                records += [(encode_key(OffsetKey(gid, t, p)), None) for t, p in group.offsets]
                records += group.tombstones()
                group.mark_dead(now)
                del self.groups[gid]
                removed[gid] = group
                results[gid] = None
        if not records:
            return respond(results)
        # Group ids of one request may live on different partitions: persist per group, and
        # answer once every group's tombstones are durable or refused.
        by_group: dict[str, list] = {}
        for key, value in records:
            by_group.setdefault(decode_key(key).group, []).append((key, value))  # every key type has .group
        remaining = [len(by_group)]

        def stored(gid: str, err: KafkaError | None) -> None:
            if err is not None:
                results[gid] = err
                group = removed[gid]
                if gid not in self.groups:
                    # Its tombstones are not in the log: after a restart the group would be
                    # back. Revert it now (unless the id was taken by a new group meanwhile),
                    # as Kafka's coordinator reverts state whose records were not written. A
                    # revert, not a transition: the group is as it was, Empty.
                    group.undelete()
                    self.groups[gid] = group
            remaining[0] -= 1
            if remaining[0] == 0:
                respond(results)

        for gid, recs in by_group.items():
            self.persist(gid, recs, lambda err, gid=gid: stored(gid, err))
        return None

    def expire(self, group: Group, now: int, retention_ms: int) -> None:
        """KIP-211 retention of an Empty ``group``'s offsets; removes the group too once it has
        neither offsets nor members and stayed idle for ``retention_ms``."""
        expired = [tp for tp, v in group.offsets.items()
                   if now - max(v.commit_timestamp, group.state_timestamp_ms) >= retention_ms]
        idle_too_long = now - group.state_timestamp_ms >= retention_ms
        if not expired and (group.offsets or group.members or group.pending_members or not idle_too_long):
            return
        records = [(encode_key(OffsetKey(group.group_id, t, p)), None) for t, p in expired]
        for tp in expired:
            del group.offsets[tp]
        if not group.offsets and not group.members:
            records += group.tombstones()
            group.mark_dead(now)
            del self.groups[group.group_id]
        notice(log, "group %s: %d committed offset(s) expired (offsets.retention.ms=%d)%s", group.group_id,
               len(expired), retention_ms, "; group metadata removed" if group.is_dead() else "")
        self.persist(group.group_id, records, lambda _err: None)

    # ------------------------------------------------------------------ transactional offsets

    def stage_transactional(self, producer_id: int, group_id: str, offsets: dict[TopicPartition, OffsetValue]) -> None:
        """A TxnOffsetCommit's offsets, written, awaiting the producer's marker."""
        staged = self.pending_txn_offsets.setdefault(producer_id, {})
        for (topic, partition), value in offsets.items():
            staged[(group_id, topic, partition)] = value

    def complete_transactional(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: its offsets become visible (commit) or vanish."""
        staged = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        for (group_id, topic, partition), value in staged.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self.clock())
            group.offsets[(topic, partition)] = value

    def has_pending_transactional(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in staged for staged in self.pending_txn_offsets.values())

    def check_stable(self, group_id: str, topic: str, partition: int) -> None:
        """require_stable OffsetFetch: raises UnstableOffsetCommit while a transactional commit
        of this partition's offset awaits its marker."""
        if self.has_pending_transactional(group_id, topic, partition):
            raise errors.UnstableOffsetCommit(
                f"group {group_id!r}: the offset of {topic}-{partition} has a transactional commit awaiting its "
                "transaction's end")
