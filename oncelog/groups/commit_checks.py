"""Who may commit or fetch a group's offsets: the member checks of OffsetCommit, TxnOffsetCommit
(KIP-447) and OffsetFetch, for both protocols (Kafka's OffsetMetadataManager.validateOffsetCommit
and the groups' validateOffsetCommit / validateOffsetFetch). Sans-IO: the coordinator's groups,
clock and topics.

A check raises what refuses the whole request (a domain error, turned into a wire code at the
edge), and returns None if every partition may be committed, or, for a consumer (KIP-848) group,
a check per partition (KIP-1251: a commit at an older member epoch is accepted for a partition
the member has owned since that epoch). A classic group's member is checked by generation and
instance id, a consumer or streams group's by member epoch (a classic member of it by generation = member
epoch, ILLEGAL_GENERATION when they differ).
"""

from __future__ import annotations

from typing import Callable, Mapping

from .. import errors
from ..errors import KafkaError
from .consumer_state import ConsumerGroup
from .streams_coordinator import StreamsGroupCoordinator
from .streams_group import StreamsGroup
from .state import Group, GroupState, check_member, illegal_generation

# A per-partition offset-commit check: (topic name, partition) -> None or why not.
PartitionCheck = Callable[[str, int], "KafkaError | None"]


class CommitChecks:
    def __init__(self, groups: dict, clock: Callable[[], int], topics: Callable[[], Mapping[str, tuple]]) -> None:
        self.groups = groups
        self.clock = clock
        self.topics = topics

    def offset_commit(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None, *,
                      api_version: int = 9) -> PartitionCheck | None:
        """May these offsets be committed? Raises why not. Creates a simple (unmanaged) group for
        generation -1 commits to an unknown group, as Kafka does. The group id "" is a group like
        any other here (Kafka refuses only a null one for OffsetCommit: old consumers commit to
        ""). A commit with a generation to an unknown group: GROUP_ID_NOT_FOUND from OffsetCommit
        v9, ILLEGAL_GENERATION before (Kafka's OffsetMetadataManager.validateOffsetCommit)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation < 0:
                self.groups[group_id] = Group(group_id, state_timestamp_ms=self.clock())
                return None
            if api_version >= 9:
                raise errors.GroupIdNotFound(f"Group {group_id} not found.")
            raise errors.IllegalGeneration(f"group {group_id!r} does not exist, so has no generation {generation}")
        if group.is_dead():
            raise errors.CoordinatorNotAvailable(f"group {group_id!r} is being removed (Dead)")
        if isinstance(group, ConsumerGroup):
            return self.consumer_offset_commit(group, member_id, generation, transactional=False,
                                               api_version=api_version, instance_id=group_instance_id)
        if isinstance(group, StreamsGroup):
            return StreamsGroupCoordinator.offset_commit(group, member_id, generation, transactional=False,
                                                         api_version=api_version, instance_id=group_instance_id)
        if generation < 0 and group.state is GroupState.EMPTY:
            return None
        error = check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            raise error
        if generation != group.generation:
            raise illegal_generation(group, generation)
        if group.state is GroupState.COMPLETING_REBALANCE:
            raise errors.RebalanceInProgress(f"group {group_id!r} is completing a rebalance: commit after SyncGroup")
        member = group.members[member_id]
        member.deadline_ms = self.clock() + member.session_timeout_ms
        return None

    def txn_offset_commit(self, group_id: str, generation: int, member_id: str,
                          group_instance_id: str | None) -> PartitionCheck | None:
        """KIP-447: a transactional commit carrying group metadata is fenced like a plain one;
        raises why not. Returns None or, for a consumer group, a per-partition check (as
        :meth:`offset_commit`; its STALE_MEMBER_EPOCH is ILLEGAL_GENERATION here)."""
        if not group_id:
            raise errors.InvalidGroupId("TxnOffsetCommit: the group id is empty")
        if generation < 0 and not member_id:
            return None  # no group metadata sent (older clients / standalone)
        group = self.groups.get(group_id)
        if group is None or group.is_dead():
            raise errors.IllegalGeneration(f"group {group_id!r} does not exist, so has no generation {generation}")
        if isinstance(group, (ConsumerGroup, StreamsGroup)):
            # KIP-447 with member epochs; a stale epoch is ILLEGAL_GENERATION here, as Kafka
            # answers TxnOffsetCommit (older transactional clients know no STALE_MEMBER_EPOCH).
            commit = self.consumer_offset_commit if isinstance(group, ConsumerGroup) \
                else StreamsGroupCoordinator.offset_commit
            try:
                check = commit(group, member_id, generation, transactional=True,
                               api_version=99, instance_id=group_instance_id)
            except errors.StaleMemberEpoch as exc:
                raise errors.IllegalGeneration(str(exc)) from None
            if check is None:
                return None

            def txn_check(topic: str, partition: int) -> KafkaError | None:
                error = check(topic, partition)
                return errors.IllegalGeneration(str(error)) if isinstance(error, errors.StaleMemberEpoch) else error
            return txn_check
        error = check_member(group_id, group, member_id, group_instance_id)
        if error is not None:
            raise error
        if generation != group.generation:
            raise illegal_generation(group, generation)
        return None

    def offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ from a consumer-group member: its member epoch must be current
        (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); an admin's (no member id, epoch -1) and any to
        a classic group are not checked (Kafka's validateOffsetFetch)."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.is_dead():
            self.consumer_offset_fetch(group, member_id, member_epoch)
        elif isinstance(group, StreamsGroup) and not group.is_dead():
            StreamsGroupCoordinator.offset_fetch(group, member_id, member_epoch)

    # ------------------------------------------------------------------ consumer (KIP-848) groups

    def consumer_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, *,
                               transactional: bool, api_version: int,
                               instance_id: str | None = None) -> PartitionCheck | None:
        """Kafka 4.4's ConsumerGroup.validateOffsetCommit: raises what refuses the whole commit;
        returns None if every partition may be committed, or a check per partition (KIP-1251:
        a commit at an older member epoch is accepted for a partition the member has owned since
        that epoch — a member committing what it consumed just before a rebalance is no zombie).

        1. Epoch < 0 to a group without members: an admin's (or a standalone consumer's) commit.
        2. A transactional commit without group metadata (epoch -1, no member): accepted (KIP-447's
           older producers).
        3. The member must exist (UNKNOWN_MEMBER_ID); a plain commit needs OffsetCommit v9+.
        4. Its current epoch: accepted; a newer one: STALE_MEMBER_EPOCH; an older one: per partition,
           which must be assigned or being revoked, at an assignment epoch not after it.
        """
        # Steps 1 and 2. No member to check.
        if member_epoch < 0 and not group.members:
            return None
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return None
        # Step 3. The member.
        member = group.members.get(member_id)
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if not transactional and api_version < 9 and member.classic is None:
            raise errors.UnsupportedVersion(
                "OffsetCommit version 9 or above must be used by members using the consumer group protocol")
        # Step 4. Its epoch. A classic member's generation is its member epoch; a mismatch is
        # ILLEGAL_GENERATION.
        stale = errors.StaleMemberEpoch if member.classic is None else errors.IllegalGeneration
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            raise stale(
                f"Received member epoch {member_epoch} is newer than current member epoch {member.member_epoch}.")
        topics = self.topics()

        def check(topic: str, partition: int) -> KafkaError | None:
            tid = topics.get(topic, (None, 0))[0]
            assigned_at = member.partition_epochs.get((tid, partition))
            if assigned_at is None:
                return stale(f"Partition {topic}-{partition} is not assigned or pending revocation for member.")
            if member_epoch < assigned_at:
                return stale(
                    f"Received member epoch {member_epoch} is older than assignment epoch {assigned_at} of "
                    f"partition {topic}-{partition}.")
            return None
        return check

    @staticmethod
    def consumer_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: no member id and epoch -1 (admin) is accepted;
        a classic member's generation that is not its epoch is ILLEGAL_GENERATION, as in commits."""
        if member_id is None and member_epoch < 0:
            return
        member = group.members.get(member_id or "")
        if member is None:
            raise errors.UnknownMemberId(f"Member {member_id} is not a member of group {group.group_id}.")
        if member_epoch != member.member_epoch:
            if member.classic is not None:
                raise errors.IllegalGeneration(
                    f"The received generation id {member_epoch} does not match the expected member epoch "
                    f"{member.member_epoch}.")
            raise errors.StaleMemberEpoch(
                f"The received member epoch {member_epoch} does not match the expected member epoch "
                f"{member.member_epoch}.")
