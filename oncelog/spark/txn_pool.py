"""The write tasks' transactional ids (``atomicity=batch``): a pool, reused by every micro-batch
and every run of a query. Pure: names and choices, no I/O.

**Why a pool.** Kafka keeps every transactional id it has seen until
``transactional.id.expiration.ms`` (7 days) has passed without use: in its coordinator's memory
and in ``__transaction_state``. A sink that names a new id per micro-batch (or per write of a
``foreachBatch``) makes a streaming query at a 1 s trigger cost the cluster ~260,000 ids a day,
~1.8 million held at any time (Flink's KafkaSink had that defect, FLINK-34554; Redpanda caps
producer ids for it, redpanda#12424). Pooled, a query holds at most
``GENERATIONS x write tasks x attempts per task`` task ids, plus its decider
(``<prefix>.commits``) and barrier (``<prefix>.barrier``): the same after a minute and after a month.

**Names.** ``<prefix>-g<generation>-<task>-<attempt>``: ``task`` is the Spark partition id of
the write task, ``attempt`` its attempt number (a retry or a speculative copy runs under
another name), ``generation`` one of ``GENERATIONS`` (2) halves of the pool, fixed for a *run*
(one execution of the query: Spark's ``runId``; inside ``foreachBatch``, the streaming query's
run; a ``df.write`` outside a stream is a run of its own). Earlier versions named ids
``<prefix>-<run>-<task>-<attempt>``; both start with ``<prefix>-``, which is what the orphan
sweep matches, so ids of either kind left open are found and aborted.

**Which generation a run uses** (:meth:`RunHistory.generation_for`). Each decision the driver
writes (:mod:`.batch_commit`) records, newest first, the last ``GENERATIONS`` runs that decided a
batch of the query, with the generation each used. A run found there keeps its generation; a
new run takes the other one than the newest run there. The history reaches the tasks from the
driver (``prepare()`` reads the latest decision before the tasks of every batch) or, when the
driver could not read it, from the task's own read of the commit log; either way every task of
a batch computes the same generation from the same decision.

**Safety: a task never aborts a decided transaction.** The one way a client can abort another's
open transaction is InitProducerId on the same id (the other is the coordinator's
``transaction.timeout.ms``). A task calls InitProducerId on its own id once, when it starts to
write. Claim: *no task calls InitProducerId on an id whose transaction is decided* (listed in a
PENDING decision) *and not yet committed* (its EndTxn(commit) answered). Every way an id can be
met twice:

1. *The same run, a later batch* (the common case: the pool's reuse). Spark plans batch b+1 only
   after ``commit(b)`` returned, and ``commit(b)`` returns only once the decision of b is DONE:
   every EndTxn answered and every transaction CompleteCommit (:mod:`.batch_commit`, step 6). A
   commit that fails ends the run. So when batch b+1's tasks init the run's ids, no decision of
   the run is pending.
2. *The same batch, another attempt* (a retry after a failure, a speculative copy): another
   attempt number, so another id. The decision lists, per task, the one attempt whose message
   Spark handed to ``commit()``; the others are orphans, aborted by the sweep.
3. *A new run after the previous one ended* (a crash, a failure, a stop, a restart from the
   checkpoint) may find a PENDING decision of an earlier run r' (crashed between its decision and
   its last EndTxn). r' is then the newest run of the history (a run that decided is recorded by
   that very decision), so the new run takes the other generation and never inits r''s ids; and
   the new run's ``prepare()`` and ``commit()`` roll that decision forward (EndTxn(commit) from
   any process, by producer id and epoch) before deciding anything. With generations alone, a
   roll-forward before the tasks is no longer needed for safety (only for freshness).
4. *Zombies*: tasks of an ended run still running for a moment (Spark kills a cancelled Python
   task after ``spark.python.task.killTimeout``, 2 s; and a task inits its id only after it read
   its whole input, so a task cancelled while reading never inits). A zombie of the previous
   run r' uses r''s generation, not the new run's (3.). Nor can it hit r''s own pending
   decision: r' decided batch b only after every task of b finished, and never planned b+1, so
   its zombies are the attempts of b that the decision does not list (2.).

What the argument assumes, and where it stops: one run of a query at a time (Spark refuses a
second active run of a query in an application; two applications on one checkpoint are not
supported by Spark either), and zombies that do not outlive the next run's first decision when
the run they belong to decided nothing at all (a run that decided nothing is not in the
history, so the run after it may take the same generation: a zombie task of it, cancelled after
reading all its input and before its InitProducerId, and then stalled for the seconds a restart
takes, could abort a transaction of the new run's first decided batch; that batch would then
fail loudly as "batch lost", never silently). Per-run naming (the earlier scheme) had no such
corner but an unbounded number of ids; the pool trades that corner, which needs a task to
survive Spark's kill timeout, for a bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GENERATIONS = 2  # halves of the pool: a run and the one before it never share an id


def task_transactional_id(prefix: str, generation: int, partition_id: int, attempt: int) -> str:
    """The transactional id of write task ``partition_id``'s attempt ``attempt`` in ``generation``."""
    return f"{prefix}-g{generation}-{partition_id}-{attempt}"


def sweep_pattern(prefix: str) -> str:
    """A regular expression matching (whole) the task ids the orphan sweep may abort: the
    pooled ones and those of the earlier per-run naming (an 8-hex-digit run). Exact shapes, not
    ``<prefix>-*``: another query's prefix may continue this one's (``oncelog-totals`` and
    ``oncelog-totals-eu``); nor the decider (``<prefix>.commits``) or the barrier (``<prefix>.barrier``)."""
    p = re.escape(prefix)
    return rf"{p}-g\d+-\d+-\d+|{p}-[0-9a-f]{{8}}-\d+-\d+"


@dataclass(frozen=True)
class RunHistory:
    """The runs that decided the query's latest batches, newest first: ``(run id, generation)``."""

    runs: tuple[tuple[str, int], ...] = ()

    def generation_for(self, run_id: str) -> int:
        """The generation of ``run_id``: its own if it decided before, else not the newest run's."""
        for run, generation in self.runs:
            if run == run_id:
                return generation
        if not self.runs:
            return 0
        return (self.runs[0][1] + 1) % GENERATIONS

    def after(self, run_id: str, generation: int) -> "RunHistory":
        """The history a decision of ``run_id`` (its tasks in ``generation``) records."""
        older = tuple(r for r in self.runs if r[0] != run_id)
        return RunHistory(((run_id, generation),) + older[:GENERATIONS - 1])

    def to_json(self) -> list[list]:
        return [[run, generation] for run, generation in self.runs]

    @classmethod
    def from_json(cls, raw) -> "RunHistory":
        """A decision's ``runs`` (absent in decisions of earlier versions: no history)."""
        runs = []
        for item in raw or ():
            try:
                run, generation = str(item[0]), int(item[1])
            except (TypeError, ValueError, IndexError):
                continue  # a decision is our own record; tolerate a damaged entry
            if 0 <= generation < GENERATIONS:
                runs.append((run, generation))
        return cls(tuple(runs[:GENERATIONS]))
