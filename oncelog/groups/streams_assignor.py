"""The server-side task assignor of streams groups: Kafka 4.4's ``StickyTaskAssignor`` ("sticky",
its only built-in one), active tasks. Pure.

Inputs: each member's process id and the active tasks it holds now (its assigned tasks, not its
previous target: Kafka's TargetAssignmentBuilder); the number of tasks of each subtopology.

1. Tasks sorted by (partition, subtopology id).
2. Stickiness: a task goes back to its previous active owner while that member is under the
   quota ``ceil(tasks / members)``; the quota is recomputed (ceil again over the tasks and members
   left) each time a member reaches it.
3. (Previous standby owners: none yet, standby tasks are not assigned — slice 2.)
4. The rest, sorted by (subtopology id, partition): each to the process with the lowest load
   (tasks / its members), there to its member with the fewest tasks. Ties go to the lower
   process id, then member id (Kafka's priority queues leave ties unordered).

A process never holds a task twice. No members: no assignment (Kafka's TaskAssignorException is
not reached: the coordinator assigns only with members).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Mapping

Task = tuple[str, int]  # (subtopology id, partition)


@dataclass(frozen=True)
class MemberSpec:
    process_id: str
    active: frozenset[Task] = frozenset()


def assign(members: Mapping[str, MemberSpec], tasks: Mapping[str, int]) -> dict[str, frozenset[Task]]:
    """member id -> its target active tasks (every member has an entry)."""
    if not members:
        return {}
    all_tasks = sorted(((sid, p) for sid, n in tasks.items() for p in range(n)), key=lambda t: (t[1], t[0]))
    out: dict[str, set[Task]] = {m: set() for m in members}
    counts = dict.fromkeys(members, 0)
    by_process: dict[str, list[str]] = {}
    for mid in sorted(members):
        by_process.setdefault(members[mid].process_id, []).append(mid)
    process_tasks = dict.fromkeys(by_process, 0)
    state = {"left": len(all_tasks), "members": len(members)}
    state["quota"] = math.ceil(state["left"] / state["members"]) if state["members"] else 0
    prev_owner: dict[Task, str] = {}
    for mid in sorted(members):
        for t in members[mid].active:
            prev_owner.setdefault(t, mid)

    def give(mid: str, task: Task) -> None:
        out[mid].add(task)
        counts[mid] += 1
        process_tasks[members[mid].process_id] += 1
        if counts[mid] == state["quota"] and state["members"] > 1:
            state["members"] -= 1
            state["left"] -= counts[mid]
            state["quota"] = math.ceil(max(state["left"], 0) / state["members"])

    # Step 2. Stickiness to the previous active owner.
    rest = []
    for task in all_tasks:
        prev = prev_owner.get(task)
        if prev is not None and counts[prev] < state["quota"]:
            give(prev, task)
        else:
            rest.append(task)
    # Step 4. The rest to the least-loaded process, and its least-loaded member.
    rest.sort()
    heap = [(process_tasks[p] / len(ms), p) for p, ms in by_process.items()]
    heapq.heapify(heap)
    for task in rest:
        _, pid = heapq.heappop(heap)
        mid = min(by_process[pid], key=lambda m: (counts[m], m))
        out[mid].add(task)
        counts[mid] += 1
        process_tasks[pid] += 1
        heapq.heappush(heap, (process_tasks[pid] / len(by_process[pid]), pid))
    return {m: frozenset(ts) for m, ts in out.items()}
