"""KIP-848 member reconciliation, table-driven (no sockets, no clock): each row is a member's state,
a target assignment, who owns what, what the member reports owning — and the step KIP-848 (and
Kafka's CurrentAssignmentBuilder, whose test cases these follow) says comes next.

Rules the rows check:
* a member revokes before it is given anything new, and keeps its epoch while revoking (so its
  offset commits of revoked partitions are fenced by epoch);
* a partition is handed over only when free (its owner let go): UNRELEASED_PARTITIONS until then;
* a member that reports no owned partitions (None) is assumed to still own what it must revoke;
* a member revoking what the target gives back to it may take it back at once;
* an UNKNOWN state (a newer coordinator's) starts over if the member owns nothing, else fences it.
"""

from __future__ import annotations

import uuid

import pytest

from oncelog.groups.consumer_state import (
    MEMBER_TRANSITIONS,
    ConsumerMember,
    FencedMemberEpochError,
    MemberEvent,
    MemberState,
    next_member_state,
)

A, B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
M = MemberState


def P(**topics):
    """P(A=[1, 2]) -> {A: frozenset({1, 2})} (topic names are the module's ids)."""
    return {globals()[t]: frozenset(ps) for t, ps in topics.items() if ps}


def owners(**taken):
    """owner_epoch for partitions owned by others: owners(A={3: 10}) -> A-3 owned at epoch 10."""
    table = {(globals()[t], p): e for t, d in taken.items() for p, e in d.items()}
    return lambda t, p: table.get((t, p), -1)


ROWS = [
    # (name, state, epoch, assigned, pending, target_epoch, target, owner_epoch, owned) ->
    #     (state, epoch, assigned, pending)
    ("stable, new epoch, same partitions", M.STABLE, 10, P(A=[1, 2]), {}, 11, P(A=[1, 2]), owners(), P(A=[1, 2]),
     (M.STABLE, 11, P(A=[1, 2]), {})),
    ("stable, reconciled: nothing to do", M.STABLE, 11, P(A=[1, 2]), {}, 11, P(A=[1, 2, 3]), owners(), P(A=[1, 2]),
     (M.STABLE, 11, P(A=[1, 2]), {})),
    ("stable, a free partition is added", M.STABLE, 10, P(A=[1, 2]), {}, 11, P(A=[1, 2, 3]), owners(), P(A=[1, 2]),
     (M.STABLE, 11, P(A=[1, 2, 3]), {})),
    ("stable, a new partition still owned elsewhere", M.STABLE, 10, P(A=[1, 2]), {}, 11, P(A=[1, 2, 3]),
     owners(A={3: 10}), P(A=[1, 2]), (M.UNRELEASED_PARTITIONS, 11, P(A=[1, 2]), {})),
    ("stable, some free some not: the free ones now", M.STABLE, 10, P(A=[1]), {}, 11, P(A=[1, 2], B=[0]),
     owners(A={2: 10}), P(A=[1]), (M.UNRELEASED_PARTITIONS, 11, P(A=[1], B=[0]), {})),
    ("stable, a partition taken away: revoke first, keep the epoch", M.STABLE, 10, P(A=[1, 2, 3]), {}, 11,
     P(A=[1, 2]), owners(), P(A=[1, 2, 3]), (M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]))),
    ("stable, taken away and one added: nothing new before the revocation", M.STABLE, 10, P(A=[1, 2, 3]), {}, 11,
     P(A=[1, 2], B=[0]), owners(), P(A=[1, 2, 3]), (M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]))),
    ("stable, taken away but the member already let go", M.STABLE, 10, P(A=[1, 2, 3]), {}, 11, P(A=[1, 2], B=[0]),
     owners(), P(A=[1, 2]), (M.STABLE, 11, P(A=[1, 2], B=[0]), {})),
    ("stable, everything taken away", M.STABLE, 10, P(A=[1, 2]), {}, 11, {}, owners(), None,
     (M.UNREVOKED_PARTITIONS, 10, {}, P(A=[1, 2]))),
    ("unrevoked, still owns a revoked partition: wait", M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]), 11,
     P(A=[1, 2, 4]), owners(), P(A=[1, 2, 3]), (M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]))),
    ("unrevoked, owned not reported: assumed still owned", M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]), 11,
     P(A=[1, 2]), owners(), None, (M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]))),
    ("unrevoked, revoked: on to the target epoch with the new partitions", M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]),
     P(A=[3]), 11, P(A=[1, 2, 4]), owners(), P(A=[1, 2]), (M.STABLE, 11, P(A=[1, 2, 4]), {})),
    ("unrevoked, revoked, but the new one is not free yet", M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]), P(A=[3]), 11,
     P(A=[1, 2, 4]), owners(A={4: 10}), P(A=[1, 2]), (M.UNRELEASED_PARTITIONS, 11, P(A=[1, 2]), {})),
    ("unrevoked, revoked, and the target moved on: revoke again at epoch + 1", M.UNREVOKED_PARTITIONS, 10,
     P(A=[1, 2]), P(A=[3]), 12, P(A=[1]), owners(), P(A=[1, 2]),
     (M.UNREVOKED_PARTITIONS, 11, P(A=[1]), P(A=[2]))),
    ("unrevoked, revoked one the target gives back: taken back at once", M.UNREVOKED_PARTITIONS, 10, P(A=[1, 2]),
     P(A=[3]), 11, P(A=[1, 2, 3]), owners(A={3: 10}), P(A=[1, 2]), (M.STABLE, 11, P(A=[1, 2, 3]), {})),
    ("unreleased, the partition was released", M.UNRELEASED_PARTITIONS, 11, P(A=[1, 2]), {}, 11, P(A=[1, 2, 3]),
     owners(), P(A=[1, 2]), (M.STABLE, 11, P(A=[1, 2, 3]), {})),
    ("unreleased, still owned elsewhere", M.UNRELEASED_PARTITIONS, 11, P(A=[1, 2]), {}, 11, P(A=[1, 2, 3]),
     owners(A={3: 11}), P(A=[1, 2]), (M.UNRELEASED_PARTITIONS, 11, P(A=[1, 2]), {})),
    ("unreleased, and now the target takes one away", M.UNRELEASED_PARTITIONS, 11, P(A=[1, 2]), {}, 12,
     P(A=[1, 3]), owners(A={3: 11}), P(A=[1, 2]), (M.UNREVOKED_PARTITIONS, 11, P(A=[1]), P(A=[2]))),
    ("unknown, owns nothing: starts over at the target", M.UNKNOWN, 7, P(A=[1]), {}, 11, P(A=[1, 2]), owners(),
     {}, (M.STABLE, 11, P(A=[1, 2]), {})),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_reconciliation_step(row):
    _, state, epoch, assigned, pending, target_epoch, target, owner_epoch, owned, expected = row
    member = ConsumerMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                            assigned=assigned, pending_revocation=pending)
    step = next_member_state(member, target_epoch, target, owner_epoch, owned)
    assert (step.state, step.member_epoch, step.assigned, step.pending_revocation) == expected
    # The step's event is the table's: it leads from the member's state to the step's.
    assert step.event is None or MEMBER_TRANSITIONS[state][step.event] is step.state
    # Whatever the step, a member never owns a partition the target does not give it unless it
    # is revoking it, and never one owned by another member.
    held = {(t, p) for parts in (step.assigned, step.pending_revocation) for t, ps in parts.items() for p in ps}
    for t, p in held:
        assert p in target.get(t, ()) or p in step.pending_revocation.get(t, ()) or (t, p) in {
            (t2, p2) for t2, ps in assigned.items() for p2 in ps}
        if (t, p) not in {(t2, p2) for parts in (assigned, pending) for t2, ps in parts.items() for p2 in ps}:
            assert owner_epoch(t, p) == -1, f"{t}-{p} handed over while owned elsewhere"


def test_unknown_state_with_partitions_is_fenced():
    member = ConsumerMember("m", member_epoch=7, state=M.UNKNOWN, assigned=P(A=[1]))
    for owned in (None, P(A=[1])):
        with pytest.raises(FencedMemberEpochError):
            next_member_state(member, 11, P(A=[1]), owners(), owned)


def test_transition_table_covers_every_state_and_never_enters_unknown():
    assert set(MEMBER_TRANSITIONS) == set(MemberState)
    assert all(M.UNKNOWN not in nxt.values() for nxt in MEMBER_TRANSITIONS.values())
    # Every reconciliation move the table allows is taken by some row (the table is not wider
    # than KIP-848), but UNKNOWN's to UNRELEASED_PARTITIONS (no row starts over while another
    # member holds a partition); a rejoin is the coordinator's (test_transition_tables.py).
    taken = set()
    for _, state, epoch, assigned, pending, target_epoch, target, owner_epoch, owned, _ in ROWS:
        member = ConsumerMember("m", member_epoch=epoch, state=state, assigned=assigned, pending_revocation=pending)
        step = next_member_state(member, target_epoch, target, owner_epoch, owned)
        if step.event is not None:
            taken.add((state, step.event))
    allowed = {(old, event) for old, events in MEMBER_TRANSITIONS.items() for event in events}
    assert allowed - taken == {(M.UNKNOWN, MemberEvent.UNRELEASED)} | {(s, MemberEvent.REJOIN) for s in MemberState}
    assert (M.UNKNOWN, MemberEvent.REVOKE) not in allowed  # from UNKNOWN the member owns nothing
