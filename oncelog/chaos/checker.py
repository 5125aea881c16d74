"""Anomalies by class in a flattened chaos history (sans-IO, vectorised; SCCs by scipy).

:func:`check` takes a :class:`~oncelog.chaos.history.Flat` and returns a :class:`Result`: per class
a count and examples, each example listing the offending operations (op indices) and one readable
line. Every rule is a handful of numpy passes over the write and read columns; the dependency
graph's strongly connected components come from ``scipy.sparse.csgraph``. Descriptions are built
only for the examples kept (``max_examples`` per class), so a badly broken run stays fast.

Words (after Jepsen's Kafka workload, ``jepsen.tests.kafka``):

* A write is **committed** when its op is ``ok``; or, for a ``txn`` op that ended ``info``, when
  any write of that op was read by anyone (transactions are atomic: one visible write means the
  commit happened); or, for a non-transactional ``send`` that ended ``info``, when that very write
  was acknowledged (it has an offset) or read (a send op's micro-ops are not atomic: each stands
  alone, and an op is ``info`` as soon as one of them is unanswered). ``fail`` never commits.
* A write is **read** when any read returned its value: consumers, consume-transform-produce
  transactions (even ones that aborted afterwards: the record was in the log) and the final reader.
* A committed write's **position** is its acknowledged offset, else the offset a reader saw it at.
  The **version order** of a partition is its committed writes ordered by position.

Failing classes (``Result.ok`` is False if any is non-zero):

* ``lost-write``: a committed write with an acknowledged offset ``o`` in partition ``p``, never
  read, while some reader read an offset ``> o`` in ``p``. Also, when the final reader reached the
  end offset ``E`` it was given for ``p``: every committed write of ``p`` never read whose offset
  is ``< E``, or whose op completed before the final assign (the log ended before an offset that
  had been acknowledged).
* ``duplicate``: one value seen at two or more distinct (partition, offset) (acks and reads).
* ``inconsistent-offsets``: one (partition, offset) seen holding two or more distinct values.
* ``aborted-read``: a read of a value whose op definitely failed (txn aborted, send failed); one
  anomaly per value, with all its readers.
* ``uncommitted-read``: a read returned (upper bound of its time: the poll's time, or the reading
  txn's completion) before the writer could have made it visible: before the writer's
  ``commit_time`` when the txn op carries one (the time the workload asked for the commit, just
  before EndTxn: a read_committed reader cannot see the records earlier), else before the writer
  op was even invoked (an impossible history). Reads of failed writes are ``aborted-read`` instead.
  Sound because each bound is one-sided: the read surely happened by its time, the commit surely
  was not requested before ``commit_time``.
* ``partial-read``: a committed txn some of whose writes were read while others are lost writes
  (every partial read is therefore also counted under ``lost-write``).
* ``nonmonotonic-poll``: within one assignment session and partition, a read at an offset ``<=``
  the one read before it (this covers a txn op's own polls: they are in its process's session).
* ``poll-skip``: within one session and partition, consecutive reads at offsets ``a < b`` with a
  committed write positioned strictly between them that *someone* read (gaps alone are normal:
  control records, aborted batches; a committed write nobody read is a ``lost-write`` instead).
* ``internal-read``: a txn op read a value it wrote itself.
* ``duplicate-processing``: a record read by two committed consume-transform-produce transactions
  (txn ops carrying ``"group"``) of the same consumer group: processed twice, the exactly-once
  loop broken (offsets not atomic with the outputs, or a zombie not fenced).
* ``G1c``: circular information flow — a cycle of wr edges only (T1 read T2's write and T2 read
  T1's, maybe through others), between committed txn ops and committed non-transactional writes
  (one node per send micro-op, since a send op of several records is not atomic; one node per
  txn op). wr: a committed txn op read a value written by another node. Impossible under
  read_committed: each read needs its writer's commit, and a reader commits after its reads.

Share groups (KIP-932; from the ``share-*`` ops of ``--share-consumers`` runs and the run's
``crash`` ops, :mod:`oncelog.chaos`). A delivery's time is bounded below by its poll's ``since``
(the poll began then) and above by the poll op's time; an acknowledgement's outcome is its micro-op's
(``ok`` = durable, ``fail`` = refused, ``info`` = unknown, also when the process died):

* ``share-accepted-twice``: a value with an ACCEPT answered ``ok`` (completed at ``t``) delivered
  again by a poll that began after ``t``, to any consumer.
* ``share-rejected-redelivered``: the same for a REJECT answered ``ok``.
* ``share-lost``: only when a final drain got to the end (``share-final-done`` with ``drained``):
  a write to the share group's topics that was acknowledged (its op ``ok``, or an ``info`` send with
  an offset), never REJECTed (any outcome), never ACCEPTed with outcome ``ok`` or ``info``, and
  never seen delivered with a count ``>=`` the limit (such a record may be archived at the limit).
* ``share-beyond-limit``: a delivery whose delivery count exceeds ``L + c``: ``L`` the group's
  ``share.delivery.count.limit`` (from the ``share-group`` op, else 5) and ``c`` the broker crashes
  (``crash`` ops: a SIGKILL of the broker or a node, or one exiting by itself) after the value's
  write was invoked and before the poll returned (acquisitions are not persisted: Kafka allows
  deliveries past the limit after a crash).
* ``share-stale-ack``: an acknowledgement of a process's delivery (count ``d``) answered ``ok``
  although another process had already been given the value with a count ``> d`` before the
  acknowledgement was sent: the broker took the record from its first holder (lock expiry,
  release, session end), so that holder's acknowledgement must be refused.
* ``share-aborted-read``: a read_committed share group (the ``share-group`` op's ``isolation``)
  delivered a value whose write definitely failed (an aborted transaction).

Informational (never failing):

* ``unseen``: committed writes never read and not lost (no reader got past them).
* ``G0 (allowed)``: ww-only cycles (strongly connected components of the ww graph); Kafka allows
  them (interleaved transactions writing several partitions), as Jepsen's analysis says.
* ``G1c-ww (allowed)``: a cycle of ww and wr edges with a wr edge, ww from a partition's version
  order (consecutive committed writes of different nodes by offset). Offsets order writes by
  append, not by commit: T2 appends to b/0, T1 appends to b/0 and a/0 and commits, T2 reads T1's
  a/0 and commits — a legal Kafka history with a ww+wr cycle. Jepsen's Kafka workload reports
  such cycles as G1c; here only wr-only cycles fail.
* ``G-single/G2 (allowed)``: components that need an rw edge to be cyclic: rw from txn ``T1`` to
  the writer of the next committed version after the highest offset ``T1`` read in a partition.
  read_committed promises no more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from .history import (CRASH, F_NAMES, FAIL, INFO, OK, SEND, SHARE_ACK, SHARE_FINAL_DONE, SHARE_GROUP, SHARE_POLL,
                      TXN, TYPE_NAMES, Flat, paused_gc)

SHARE_FAILING = ("share-accepted-twice", "share-rejected-redelivered", "share-lost", "share-beyond-limit",
                 "share-stale-ack", "share-aborted-read")
FAILING = ("lost-write", "duplicate", "inconsistent-offsets", "aborted-read", "uncommitted-read",
           "partial-read", "nonmonotonic-poll", "poll-skip", "internal-read", "duplicate-processing", "G1c",
           *SHARE_FAILING)
SHARE_DEFAULT_LIMIT = 5  # Kafka's share.delivery.count.limit default, when no share-group op says
INFORMATIONAL = ("unseen", "G0 (allowed)", "G1c-ww (allowed)", "G-single/G2 (allowed)")
CLASSES = FAILING + INFORMATIONAL

# (partition, offset) as one sortable int64: offsets stay below 2^40, partition ids below 2^23.
_K = np.int64(1 << 40)
WW, WR, RW = 0, 1, 2
_EDGE = ("ww", "wr", "rw")


def _unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values. np.unique (numpy 2.4, hash based) takes ~6 s on 6M int64 where a
    sort takes 0.05 s, so every distinct-values step here sorts."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _first_of_each(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, index in ``a`` of the first occurrence of each)."""
    order = np.argsort(a, kind="stable")
    sa = a[order]
    new = np.r_[True, sa[1:] != sa[:-1]] if len(a) else np.zeros(0, dtype=bool)
    return sa[new], order[new]


@dataclass(frozen=True)
class Anomaly:
    """One anomaly: the operations involved (op indices, as in the history) and what happened."""

    ops: tuple[int, ...]
    description: str


@dataclass
class ClassReport:
    name: str
    failing: bool
    count: int = 0
    anomalies: list[Anomaly] = field(default_factory=list)  # the first max_examples of them


@dataclass
class Result:
    classes: dict[str, ClassReport]
    info: dict

    @property
    def ok(self) -> bool:
        return not any(c.count for c in self.classes.values() if c.failing)

    @property
    def counts(self) -> dict[str, int]:
        return {name: c.count for name, c in self.classes.items()}

    def anomalies(self, name: str) -> list[Anomaly]:
        return self.classes[name].anomalies

    def flagged(self) -> set[str]:
        """The failing classes with at least one anomaly."""
        return {name for name, c in self.classes.items() if c.failing and c.count}

    def to_json(self) -> dict:
        return {"ok": self.ok,
                "classes": {name: {"count": c.count, "failing": c.failing,
                                   "anomalies": [{"ops": list(a.ops), "description": a.description}
                                                 for a in c.anomalies]}
                            for name, c in self.classes.items()},
                "info": self.info}

    def table(self, examples: int = 2) -> list[tuple[str, int, str]]:
        """Rows (class, count, examples) in the classes' fixed order; informational classes last."""
        return [(name, c.count, "; ".join(a.description for a in c.anomalies[:examples]))
                for name, c in self.classes.items()]


def check(flat: Flat, *, max_examples: int = 100) -> Result:
    """Every class of :data:`CLASSES` on ``flat``; see the module docstring for the rules."""
    with paused_gc():  # a history's millions of live objects make each collection cost seconds
        return _Checker(flat, max_examples).run()


def _session_order(session: np.ndarray, partition: np.ndarray, seq: np.ndarray, partitions: int) -> np.ndarray:
    """Read indices ordered by (session, partition, seq, position): what np.lexsort would give,
    through two plain sorts of unique int64 keys (the index in the low digits), ~10x faster on
    millions of reads. Falls back to lexsort when the keys would not fit in int64."""
    R = len(session)
    n = np.int64(R)
    if (int(seq.max()) + 1) * R >= 1 << 62 or (int(session.max()) + 1) * partitions * R >= 1 << 62:
        return np.lexsort((np.arange(R), seq, partition, session))
    by_seq = np.sort(seq * n + np.arange(R)) % n            # reads by (seq, position)
    rank = np.empty(R, dtype=np.int64)
    rank[by_seq] = np.arange(R)
    key = (session * partitions + partition) * n + rank
    return by_seq[np.sort(key) % n]


class _Checker:
    def __init__(self, flat: Flat, max_examples: int):
        self.f = flat
        self.max = max_examples
        self.classes = {name: ClassReport(name, name in FAILING) for name in CLASSES}
        self.info: dict = {}

    # -- reporting helpers ------------------------------------------------------------------
    def add(self, name: str, count: int, examples) -> None:
        """Record ``count`` anomalies; ``examples`` yields (ops, description) lazily, up to max."""
        report = self.classes[name]
        report.count += count
        if count:
            for ops, text in examples:
                if len(report.anomalies) >= self.max:
                    break
                report.anomalies.append(Anomaly(tuple(dict.fromkeys(int(o) for o in ops)), text))

    def op(self, i: int) -> str:
        f = self.f
        return f"op {int(i)} ({F_NAMES[f.op_f[i]]} {TYPE_NAMES[f.op_type[i]]}, process {int(f.op_process[i])})"

    def at(self, p: int, o: int) -> str:
        return f"{self.f.partitions[p]}@{int(o)}"

    def write(self, w: int) -> str:
        f = self.f
        off = int(f.w_offset[w])
        where = self.at(f.w_partition[w], off) if off >= 0 else f"{f.partitions[f.w_partition[w]]}@?"
        return f"value {int(f.w_value[w])} ({where}) of {self.op(f.w_op[w])}"

    # -- the classes ------------------------------------------------------------------------
    def run(self) -> Result:
        f = self.f
        n_ops, W, R = len(f.op_f), len(f.w_op), len(f.r_op)
        P = len(f.partitions)
        rw = f.r_write
        known = rw >= 0
        self.rk = np.flatnonzero(known)  # reads of a known write
        self.rkw = rw[self.rk]
        w_read_count = np.bincount(self.rkw, minlength=W)
        w_read = w_read_count > 0
        op_any_read = np.zeros(n_ops, dtype=bool)
        op_any_read[f.w_op[w_read]] = True
        w_committed = (f.w_outcome == OK) | ((f.w_outcome == INFO) & np.where(
            f.w_kind == TXN, op_any_read[f.w_op], w_read | (f.w_offset >= 0)))
        self.op_committed_txn = (f.op_f == TXN) & ((f.op_type == OK) | ((f.op_type == INFO) & op_any_read))
        self.w_read, self.w_committed = w_read, w_committed

        # Position: the acknowledged offset, else the smallest offset a reader saw it at (same partition).
        pos = f.w_offset.copy()
        same = f.r_partition[self.rk] == f.w_partition[self.rkw]
        seen_at = np.full(W, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(seen_at, self.rkw[same], f.r_offset[self.rk[same]])
        fill = (pos < 0) & (seen_at != np.iinfo(np.int64).max)
        pos[fill] = seen_at[fill]
        self.pos = pos
        # The version order: committed writes with a position, sorted by (partition, position).
        vw = np.flatnonzero(w_committed & (pos >= 0))
        vkey = f.w_partition[vw].astype(np.int64) * _K + pos[vw]
        o = np.argsort(vkey, kind="stable")
        self.v_writes, self.v_keys = vw[o], vkey[o]

        # Highest offset read per partition, and the read that did it.
        self.max_read = np.full(P, -1, dtype=np.int64)
        self.max_read_at = np.full(P, -1, dtype=np.int64)
        if R:
            np.maximum.at(self.max_read, f.r_partition, f.r_offset)
            top = np.flatnonzero(f.r_offset == self.max_read[f.r_partition])
            self.max_read_at[f.r_partition[top]] = top

        self.lost_write()
        self.duplicate_and_inconsistent()
        self.aborted_read()
        self.uncommitted_read()
        self.internal_read()
        self.duplicate_processing()
        self.session_order()
        self.cycles()
        self.share()

        op_counts = np.bincount(f.op_f.astype(np.int64) * 3 + f.op_type, minlength=len(F_NAMES) * 3)
        self.info.update({
            "ops": {F_NAMES[k]: {TYPE_NAMES[t]: int(op_counts[k * 3 + t]) for t in range(3)}
                    for k in range(len(F_NAMES)) if op_counts[k * 3:k * 3 + 3].any()},
            "operations": n_ops,
            "partitions": P,
            "writes": {"total": W, "acked": int((f.w_outcome == OK).sum()),
                       "acked_with_offset": int(((f.w_outcome == OK) & (f.w_offset >= 0)).sum()),
                       "failed": int((f.w_outcome == FAIL).sum()), "info": int((f.w_outcome == INFO).sum()),
                       "committed": int(w_committed.sum()), "read": int(w_read.sum()),
                       "lost": self.classes["lost-write"].count, "unseen": self.classes["unseen"].count},
            "reads": {"total": R, "in_txn": int(f.r_in_txn.sum()), "by_final_reader": int(f.op_final[f.r_op].sum()),
                      "unknown_value": int(R - len(self.rk))},
            "final_reader": {f.partitions[p]: int(f.final_end[p]) for p in np.flatnonzero(f.final_end >= 0)},
        })
        return Result(self.classes, self.info)

    def lost_write(self) -> None:
        f = self.f
        unread = self.w_committed & ~self.w_read
        part = f.w_partition
        past = unread & (f.w_offset >= 0) & (f.w_offset < self.max_read[part])
        end, t_final = f.final_end[part], f.final_time[part]
        final = unread & (end >= 0) & (((f.w_offset >= 0) & (f.w_offset < end))
                                       | ((f.w_complete_time >= 0) & (f.w_complete_time < t_final)))
        lost = past | final
        self.lost = lost
        idx = np.flatnonzero(lost)

        def examples():
            for w in idx:
                p = part[w]
                if past[w]:
                    r = self.max_read_at[p]
                    yield ((f.w_op[w], f.r_op[r]),
                           f"{self.write(w)} never read; {self.op(f.r_op[r])} read {self.at(p, f.r_offset[r])}")
                else:
                    yield ((f.w_op[w],), f"{self.write(w)} never read; the final reader reached "
                                         f"{self.at(p, end[w])}")

        self.add("lost-write", len(idx), examples())
        unseen = np.flatnonzero(unread & ~lost)
        self.add("unseen", len(unseen), (((f.w_op[w],), f"{self.write(w)} never read; no reader read past it")
                                         for w in unseen))
        # partial-read: a committed txn with some writes read and some lost.
        txn_w = f.w_kind == TXN
        n_ops = len(f.op_f)
        n_read = np.bincount(f.w_op[txn_w & self.w_read], minlength=n_ops)
        n_lost = np.bincount(f.w_op[txn_w & lost], minlength=n_ops)
        partial = np.flatnonzero((n_read > 0) & (n_lost > 0) & self.op_committed_txn)

        def partial_examples():
            for t in partial:
                ws = np.flatnonzero(f.w_op == t)
                read_ws = ws[self.w_read[ws]]
                lost_ws = ws[lost[ws]]
                readers = _unique(f.r_op[np.concatenate([self.reads_of(w) for w in read_ws])])
                seen = ", ".join(f"{int(f.w_value[w])} ({self.at(f.w_partition[w], self.pos[w])})" for w in read_ws)
                gone = ", ".join(self.write(w).split(" of ")[0] for w in lost_ws)
                yield ((t, *readers[:5]), f"{self.op(t)}: read {seen} (by ops "
                                          f"{', '.join(str(int(r)) for r in readers[:5])}); lost {gone}")

        self.add("partial-read", len(partial), partial_examples())

    def duplicate_and_inconsistent(self) -> None:
        """Observations are (value, partition, offset) from acks and reads. Most repeat the write's
        own position (every reader of a record sees it where it was acked), so only the positions
        (one per write) and the reads that deviate from them, or have no write, are grouped."""
        f = self.f
        P = f.w_partition.astype(np.int64) * _K
        has = np.flatnonzero(self.pos >= 0)
        rkey = f.r_partition.astype(np.int64) * _K + f.r_offset
        deviant = np.ones(len(f.r_op), dtype=bool)
        deviant[self.rk] = rkey[self.rk] != P[self.rkw] + self.pos[self.rkw]
        dr = np.flatnonzero(deviant)
        # A read of a value nobody wrote counts for inconsistent-offsets, not as a duplicate of it.
        known_value = np.r_[np.ones(len(has), dtype=bool), f.r_write[dr] >= 0]
        v = np.concatenate([f.w_value[has], f.r_value[dr]])
        key = np.concatenate([P[has] + self.pos[has], rkey[dr]])
        op = np.concatenate([f.w_op[has], f.r_op[dr]])
        write = np.concatenate([has, f.r_write[dr]])

        def groups(first, second, name, describe, among=None):
            # Groups of equal `first` holding >= 2 distinct `second` (among the observations `among`).
            order = np.lexsort((second, first))
            if among is not None:
                order = order[among[order]]
            if not len(order):
                return
            a, b = first[order], second[order]
            new_group = np.r_[True, a[1:] != a[:-1]]
            new_pair = new_group | np.r_[True, b[1:] != b[:-1]]
            gid = np.cumsum(new_group) - 1
            distinct = np.bincount(gid, weights=new_pair)
            bad = np.flatnonzero(distinct >= 2)
            starts = np.flatnonzero(new_group)
            ends = np.r_[starts[1:], len(order)]

            def examples():
                for g in bad:
                    members = order[starts[g]:ends[g]]
                    # Every op that saw these values: writers and all their readers.
                    ws = _unique(write[members][write[members] >= 0])
                    ops = [*op[members], *f.w_op[ws], *(f.r_op[r] for w in ws for r in self.reads_of(w))]
                    yield (ops, describe(members))

            self.add(name, len(bad), examples())

        def place(i):
            return self.at(int(key[i] // _K), int(key[i] % _K))

        def dup_text(m):
            places = ", ".join(dict.fromkeys(place(i) for i in m))
            return f"value {int(v[m[0]])} at {places} (ops {', '.join(str(int(x)) for x in dict.fromkeys(op[m]))})"

        def inc_text(m):
            values = ", ".join(str(x) for x in sorted({int(v[i]) for i in m}))
            return f"{place(m[0])} holds values {values} (ops {', '.join(str(int(x)) for x in dict.fromkeys(op[m]))})"

        groups(v, key, "duplicate", dup_text, known_value)
        groups(key, v, "inconsistent-offsets", inc_text)

    def reads_of(self, w: int) -> np.ndarray:
        """The reads of write ``w`` (an index built on first use: only examples need it)."""
        if not hasattr(self, "_by_write"):
            order = np.argsort(self.rkw, kind="stable")
            starts = np.searchsorted(self.rkw[order], np.arange(len(self.f.w_op) + 1))
            self._by_write = (self.rk[order], starts)
        reads, starts = self._by_write
        return reads[starts[w]:starts[w + 1]]

    def aborted_read(self) -> None:
        f = self.f
        ws = _unique(self.rkw[f.w_outcome[self.rkw] == FAIL])

        def examples():
            for w in ws:
                readers = _unique(f.r_op[self.reads_of(w)])
                yield ((f.w_op[w], *readers), f"{self.write(w)} read by ops {', '.join(str(int(r)) for r in readers)}")

        self.add("aborted-read", len(ws), examples())

    def uncommitted_read(self) -> None:
        f = self.f
        w = self.rkw
        commit = f.op_commit_time[f.w_op[w]]
        bound = np.where((f.w_kind[w] == TXN) & (commit >= 0), commit, f.w_time[w])
        bad = ((f.w_outcome[w] != FAIL) & (f.r_time[self.rk] < bound) & (f.r_op[self.rk] != f.w_op[w]))
        reads = self.rk[bad]

        def examples():
            for r in reads:
                wr = f.r_write[r]
                t = f.op_commit_time[f.w_op[wr]]
                what = "its commit was sent" if f.w_kind[wr] == TXN and t >= 0 else "its write was invoked"
                yield ((f.r_op[r], f.w_op[wr]), f"{self.op(f.r_op[r])} read {self.write(wr)} at "
                                                f"{self.at(f.r_partition[r], f.r_offset[r])} before {what}")

        self.add("uncommitted-read", len(reads), examples())

    def duplicate_processing(self) -> None:
        """Kafka's exactly-once loop: a record read by two committed consume-transform-produce
        transactions of one consumer group was processed twice (its output is in the log twice;
        the group's offsets did not move atomically with the outputs, or a zombie was not fenced)."""
        f = self.f
        r = self.rk
        m = f.r_in_txn[r] & self.op_committed_txn[f.r_op[r]] & (f.op_group[f.r_op[r]] >= 0)
        r = r[m]
        if not len(r):
            self.add("duplicate-processing", 0, iter(()))
            return
        key = f.op_group[f.r_op[r]] * (1 << 40) + f.r_write[r].astype(np.int64)  # (group, write read)
        o = np.lexsort((f.r_op[r], key))
        r, key = r[o], key[o]
        ops = f.r_op[r]
        # distinct (key, op) pairs, then keys with two or more of them
        first = np.r_[True, (key[1:] != key[:-1]) | (ops[1:] != ops[:-1])]
        r, key, ops = r[first], key[first], ops[first]
        start = np.r_[True, key[1:] != key[:-1]]
        idx = np.cumsum(start) - 1
        counts = np.bincount(idx)
        dups = np.flatnonzero(counts > 1)

        def examples():
            starts = np.flatnonzero(start)
            for d in dups:
                rows = r[starts[d]:starts[d] + counts[d]]
                w = f.r_write[rows[0]]
                yield (tuple(int(f.r_op[x]) for x in rows),
                       f"{self.write(w)} processed by {counts[d]} committed transactions of one group: "
                       + ", ".join(self.op(f.r_op[x]) for x in rows))

        self.add("duplicate-processing", len(dups), examples())

    def internal_read(self) -> None:
        f = self.f
        bad = f.r_in_txn[self.rk] & (f.r_op[self.rk] == f.w_op[self.rkw])
        reads = self.rk[bad]
        self.add("internal-read", len(reads),
                 (((f.r_op[r],), f"{self.op(f.r_op[r])} read its own {self.write(f.r_write[r])}") for r in reads))

    def session_order(self) -> None:
        f = self.f
        R = len(f.r_op)
        if R < 2:
            return
        order = _session_order(f.r_session, f.r_partition, f.op_seq[f.r_op], len(f.partitions))
        s, p, off = f.r_session[order], f.r_partition[order], f.r_offset[order]
        same = (s[1:] == s[:-1]) & (p[1:] == p[:-1])
        prev, cur = order[:-1], order[1:]
        back = np.flatnonzero(same & (off[1:] <= off[:-1]))

        def back_examples():
            for i in back:
                a, b = prev[i], cur[i]
                yield ((f.r_op[a], f.r_op[b]), f"session {int(f.r_session[b])} of process {int(f.r_process[b])}: "
                                               f"{self.op(f.r_op[b])} read {self.at(p[i + 1], off[i + 1])} after "
                                               f"{self.at(p[i], off[i])} (op {int(f.r_op[a])})")

        self.add("nonmonotonic-poll", len(back), back_examples())
        # poll-skip: a committed write that someone read, positioned strictly between consecutive
        # reads of a session, and not read by that session (elsewhere: out of order, already flagged).
        fwd = np.flatnonzero(same & (off[1:] > off[:-1] + 1))  # consecutive offsets skip nothing
        seen = self.w_read[self.v_writes]
        keys, writes = self.v_keys[seen], self.v_writes[seen]
        base = p[fwd].astype(np.int64) * _K
        lo = np.searchsorted(keys, base + off[fwd], side="right")
        hi = np.searchsorted(keys, base + off[fwd + 1], side="left")
        skip = hi > lo
        fwd, lo, hi = fwd[skip], lo[skip], hi[skip]
        group = np.cumsum(np.r_[True, ~same]) - 1  # (session, partition) of each sorted read
        span = np.int64(off.max()) + 2
        session_read, own = np.empty(0, dtype=np.int64), np.zeros(len(fwd), dtype=np.int64)
        if len(fwd):  # rare: count what the session itself read in between, as (group, offset) keys
            rkey = p.astype(np.int64) * _K + off
            at = np.minimum(np.searchsorted(keys, rkey), len(keys) - 1)
            hit = keys[at] == rkey
            session_read = _unique(group[hit] * span + off[hit])
            g = group[fwd] * span
            own = (np.searchsorted(session_read, g + off[fwd + 1], side="left")
                   - np.searchsorted(session_read, g + off[fwd], side="right"))
            missed = (hi - lo) > own
            fwd, lo, hi, own = fwd[missed], lo[missed], hi[missed], own[missed]

        def skip_examples():
            for i, a, b, n_own in zip(fwd, lo, hi, own):
                own_keys = group[i] * span + keys[a:b] % _K
                at = np.minimum(np.searchsorted(session_read, own_keys), len(session_read) - 1)
                w = writes[a + np.flatnonzero(session_read[at] != own_keys)[0]] if len(session_read) else writes[a]
                yield ((f.r_op[prev[i]], f.r_op[cur[i]], f.w_op[w]),
                       f"session {int(s[i])} of process {int(f.r_process[cur[i]])} read {self.at(p[i], off[i])} "
                       f"then {self.at(p[i + 1], off[i + 1])} (ops {int(f.r_op[prev[i]])}, {int(f.r_op[cur[i]])}), "
                       f"skipping {int(b - a - n_own)} committed write(s), first {self.write(w)}")

        self.add("poll-skip", len(fwd), skip_examples())

    # -- dependency cycles --------------------------------------------------------------------
    def cycles(self) -> None:
        f = self.f
        n_ops, W = len(f.op_f), len(f.w_op)
        w_node = np.where(f.w_kind == TXN, f.w_op, n_ops + np.arange(W, dtype=np.int64))
        self.w_node = w_node
        # ww: consecutive versions of one partition written by different nodes.
        vk, vn = self.v_keys, w_node[self.v_writes]
        vp = vk // _K
        cons = np.flatnonzero((vp[1:] == vp[:-1]) & (vn[1:] != vn[:-1]))
        ww = (vn[cons], vn[cons + 1], vp[cons])
        # wr: a committed txn op read a committed value another node wrote.
        r, w = self.rk, self.rkw
        m = f.r_in_txn[r] & self.op_committed_txn[f.r_op[r]] & self.w_committed[w] & (w_node[w] != f.r_op[r])
        wr = (w_node[w[m]], f.r_op[r[m]], f.r_partition[r[m]].astype(np.int64))
        # rw: from a committed txn's highest read of a partition to the writer of the next version.
        rt = np.flatnonzero(f.r_in_txn & self.op_committed_txn[f.r_op])
        if len(rt):
            o = np.lexsort((f.r_offset[rt], f.r_partition[rt], f.r_op[rt]))
            rt = rt[o]
            last = rt[np.r_[(f.r_op[rt][1:] != f.r_op[rt][:-1]) | (f.r_partition[rt][1:] != f.r_partition[rt][:-1]),
                            True]]
            k = f.r_partition[last].astype(np.int64) * _K + f.r_offset[last]
            nxt = np.searchsorted(vk, k, side="right")
            ok = nxt < len(vk)
            ok[ok] &= vp[nxt[ok]] == f.r_partition[last][ok]
            src, dst = f.r_op[last][ok], vn[nxt[ok]]
            keep = src != dst
            rwe = (src[keep], dst[keep], f.r_partition[last][ok][keep].astype(np.int64))
        else:
            rwe = (np.empty(0, np.int64),) * 3
        src = np.concatenate([ww[0], wr[0], rwe[0]])
        dst = np.concatenate([ww[1], wr[1], rwe[1]])
        part = np.concatenate([ww[2], wr[2], rwe[2]])
        kind = np.concatenate([np.full(len(ww[0]), WW, np.int8), np.full(len(wr[0]), WR, np.int8),
                               np.full(len(rwe[0]), RW, np.int8)])
        ends = np.concatenate([src, dst])
        nodes = _unique(ends)
        inv = np.searchsorted(nodes, ends)
        s, d = inv[:len(src)], inv[len(src):]
        self.nodes, self.e_src, self.e_dst, self.e_part, self.e_kind = nodes, s, d, part, kind
        self.info["graph"] = {"nodes": int(len(nodes)), "ww": int(len(ww[0])), "wr": int(len(wr[0])),
                              "rw": int(len(rwe[0]))}
        if not len(nodes):
            return
        # G0: components of the ww graph with more than one node.
        labels = self.scc(kind == WW)
        sizes = np.bincount(labels)
        g0 = np.flatnonzero(sizes > 1)
        e_ww = np.flatnonzero(kind == WW)
        self.add("G0 (allowed)", len(g0), self.cycle_examples(labels, g0, kind == WW, e_ww))
        # G1c: circular information flow, a cycle of wr edges only. Under read_committed it is
        # impossible (each read needs the writer's commit first, and a reader commits after
        # its reads). A wr edge inside a component of the ww + wr graph is reported apart,
        # allowed: offsets order two transactions' writes by append, not by commit, so T2 may
        # write p1 before T1 does, T1 commit, and T2 read T1's write of p0 then commit.
        e_wr = np.flatnonzero(kind == WR)
        labels = self.scc(kind == WR)
        inside = e_wr[labels[s[e_wr]] == labels[d[e_wr]]]
        g1c = _unique(labels[s[inside]])
        self.add("G1c", len(g1c), self.cycle_examples(labels, g1c, kind == WR, inside))
        sub = kind != RW
        labels = self.scc(sub)
        inside = e_wr[labels[s[e_wr]] == labels[d[e_wr]]]
        g1c_ww = _unique(labels[s[inside]])
        self.add("G1c-ww (allowed)", len(g1c_ww), self.cycle_examples(labels, g1c_ww, sub, inside))
        # G-single/G2: an rw edge inside a component of the whole graph.
        labels = self.scc(np.ones(len(kind), dtype=bool))
        e_rw = np.flatnonzero(kind == RW)
        inside = e_rw[labels[s[e_rw]] == labels[d[e_rw]]]
        g2 = _unique(labels[s[inside]])
        self.add("G-single/G2 (allowed)", len(g2),
                 self.cycle_examples(labels, g2, np.ones(len(kind), dtype=bool), inside))

    def scc(self, edges: np.ndarray) -> np.ndarray:
        n = len(self.nodes)
        s, d = self.e_src[edges], self.e_dst[edges]
        graph = coo_matrix((np.ones(len(s), dtype=np.int8), (s, d)), shape=(n, n)).tocsr()
        return connected_components(graph, directed=True, connection="strong")[1]

    def cycle_examples(self, labels: np.ndarray, components: np.ndarray, edges: np.ndarray, through: np.ndarray):
        """One concrete cycle per component: the first edge of ``through`` inside it, closed by the
        shortest path back (breadth-first search over the ``edges`` inside components)."""
        s, d, n = self.e_src, self.e_dst, len(self.nodes)
        inside = np.flatnonzero(edges & (labels[s] == labels[d]))
        graph = coo_matrix((np.ones(len(inside), dtype=np.int8), (s[inside], d[inside])), shape=(n, n)).tocsr()
        pair = s[inside].astype(np.int64) * n + d[inside]
        o = np.argsort(pair, kind="stable")
        pair, inside = pair[o], inside[o]
        through = through[labels[s[through]] == labels[d[through]]]  # an edge on a cycle stays inside
        comp_of = labels[s[through]]
        uniq, first = _first_of_each(comp_of)
        first_edge = dict(zip(uniq.tolist(), through[first].tolist()))
        for comp in components[:self.max]:
            e0 = first_edge[int(comp)]
            start, goal = int(d[e0]), int(s[e0])
            _, pred = breadth_first_order(graph, start, directed=True, return_predecessors=True)
            path = [goal]
            while path[-1] != start and path[-1] >= 0 and len(path) <= n:
                path.append(int(pred[path[-1]]))
            if path[-1] != start:
                continue  # cannot happen for an edge inside a strongly connected component
            path.reverse()  # start ... goal; goal -> start is e0
            hops = np.array(path[:-1], dtype=np.int64) * n + np.array(path[1:], dtype=np.int64)
            steps = [e0, *inside[np.searchsorted(pair, hops)].tolist()]
            yield self.describe_cycle([goal, *path], steps)

    def node_ops(self, node: int) -> int:
        n_ops = len(self.f.op_f)
        return node if node < n_ops else int(self.f.w_op[node - n_ops])

    def node_text(self, node: int) -> str:
        n_ops = len(self.f.op_f)
        if node < n_ops:
            return f"op {node}"
        w = node - n_ops
        return f"op {int(self.f.w_op[w])}'s send of {int(self.f.w_value[w])}"

    def describe_cycle(self, cycle: list[int], steps: list[int]):
        nodes = [int(self.nodes[c]) for c in cycle]
        text = self.node_text(nodes[0])
        for nxt, e in zip(nodes[1:], steps):
            text += f" -{_EDGE[self.e_kind[e]]}({self.f.partitions[self.e_part[e]]})-> {self.node_text(nxt)}"
        return ([self.node_ops(n) for n in nodes], text)

    # -- share groups (queue semantics) -----------------------------------------------------

    def share(self) -> None:
        """The share-* classes (module docstring). Share ops are few next to polls: plain Python."""
        f = self.f
        idx = np.flatnonzero(np.isin(f.op_f, (SHARE_POLL, SHARE_ACK, SHARE_FINAL_DONE, SHARE_GROUP, CRASH)))
        if not len(idx):
            return
        limit, topics, read_committed, drained = SHARE_DEFAULT_LIMIT, set(), False, False
        crashes: list[int] = []
        deliveries: dict[int, list[tuple]] = {}  # value -> [(since, returned, op, process, partition, offset, count)]
        acks: dict[int, list[tuple]] = {}        # value -> [(kind, outcome, invoked, completed, op, process, count)]
        for i in idx.tolist():
            op, code = f.ops[i], f.op_f[i]
            if code == SHARE_POLL:
                since = op.event.get("since", op.time)
                for _, part, off, v, count in op.value or ():
                    deliveries.setdefault(v, []).append((since, op.time, i, op.process, part, off, count))
            elif code == SHARE_ACK:
                for m in op.value or ():
                    outcome = m[6] if len(m) > 6 else "info"  # an invoke alone: the process died
                    acks.setdefault(m[3], []).append((m[4], outcome, op.time, op.complete_time, i, op.process, m[5]))
            elif code == SHARE_FINAL_DONE:
                drained |= bool((op.value or {}).get("drained"))
            elif code == SHARE_GROUP:
                v = op.value or {}
                limit = int(v.get("delivery_count_limit", limit))
                topics.update(v.get("topics", ()))
                read_committed |= v.get("isolation") == "read_committed"
            else:
                crashes.append(op.time)
        crashes.sort()
        values = np.fromiter(deliveries.keys() | acks.keys(), dtype=np.int64)
        write = dict(zip(values.tolist(), f.write_of(values).tolist()))
        self._share_redelivered(deliveries, acks, "accept", "share-accepted-twice", "accepted")
        self._share_redelivered(deliveries, acks, "reject", "share-rejected-redelivered", "rejected")
        self._share_beyond_limit(deliveries, write, crashes, limit)
        self._share_stale_ack(deliveries, acks)
        self._share_aborted_read(deliveries, write, read_committed)
        lost = self._share_lost(deliveries, acks, topics, limit) if drained else 0
        self.info["share"] = {"deliveries": sum(map(len, deliveries.values())), "values_delivered": len(deliveries),
                              "acknowledgements": {k: sum(a[0] == k for al in acks.values() for a in al)
                                                   for k in ("accept", "release", "reject")},
                              "delivery_count_limit": limit, "broker_crashes": len(crashes),
                              "final_drain": drained, "lost": lost}

    def _share_redelivered(self, deliveries, acks, kind: str, name: str, word: str) -> None:
        found = []
        for v, ack_list in acks.items():
            done = [a for a in ack_list if a[0] == kind and a[1] == "ok" and a[3] >= 0]
            if not done:
                continue
            first = min(done, key=lambda a: a[3])
            later = [d for d in deliveries.get(v, ()) if d[0] > first[3]]
            if later:
                found.append((first, v, later))

        def examples():
            for a, v, later in found:
                yield ((a[4], *[d[2] for d in later[:5]]),
                       f"value {v}: {word} durably by {self.op(a[4])} (process {a[5]}), then delivered again "
                       + ", ".join(f"by {self.op(d[2])} at {d[4]}@{d[5]} (delivery count {d[6]})" for d in later[:5]))

        self.add(name, len(found), examples())

    def _share_beyond_limit(self, deliveries, write, crashes, limit: int) -> None:
        from bisect import bisect_left

        f = self.f
        found = []
        for v, ds in deliveries.items():
            w = write.get(v, -1)
            born = int(f.w_time[w]) if w >= 0 else -1
            for d in ds:
                lived = bisect_left(crashes, d[1]) - bisect_left(crashes, born)
                if d[6] > limit + lived:
                    found.append((v, d, lived))

        def examples():
            for v, d, lived in found:
                yield ((d[2],), f"value {v} delivered by {self.op(d[2])} at {d[4]}@{d[5]} with delivery count "
                                f"{d[6]} > limit {limit} + {lived} broker crash(es) since its write")

        self.add("share-beyond-limit", len(found), examples())

    def _share_stale_ack(self, deliveries, acks) -> None:
        found = []
        for v, ack_list in acks.items():
            for a in ack_list:
                if a[1] != "ok":
                    continue
                newer = [d for d in deliveries.get(v, ()) if d[3] != a[5] and d[6] > a[6] and d[1] < a[2]]
                if newer:
                    found.append((v, a, newer[0]))

        def examples():
            for v, a, d in found:
                yield ((a[4], d[2]), f"value {v}: {self.op(d[2])} (process {d[3]}) was given it with delivery count "
                                     f"{d[6]} before {self.op(a[4])} (process {a[5]}) acknowledged ({a[0]}) its "
                                     f"delivery {a[6]}, and that acknowledgement was answered ok")

        self.add("share-stale-ack", len(found), examples())

    def _share_aborted_read(self, deliveries, write, read_committed: bool) -> None:
        f = self.f
        found = [] if not read_committed else [
            (v, ds[0], w) for v, ds in deliveries.items() if (w := write.get(v, -1)) >= 0 and f.w_outcome[w] == FAIL]
        self.add("share-aborted-read", len(found),
                 (((d[2], f.w_op[w]), f"{self.write(w)} failed (aborted), yet {self.op(d[2])} was given it "
                                      "by a read_committed share group") for v, d, w in found))

    def _share_lost(self, deliveries, acks, topics: set, limit: int) -> int:
        f = self.f
        names = np.array([p.rsplit("/", 1)[0] in topics or not topics for p in f.partitions] or [False])
        acked = (f.w_outcome == OK) | ((f.w_kind == SEND) & (f.w_outcome == INFO) & (f.w_offset >= 0))
        cand = np.flatnonzero(acked & names[f.w_partition]) if len(f.w_op) else np.empty(0, dtype=np.int64)
        if not topics:  # no share-group op: the topics the share consumers were given records of
            seen = {d[4].rsplit("/", 1)[0] for ds in deliveries.values() for d in ds}
            cand = np.array([w for w in cand.tolist() if f.partitions[f.w_partition[w]].rsplit("/", 1)[0] in seen],
                            dtype=np.int64)
        found = []
        for w in cand.tolist():
            v = int(f.w_value[w])
            ack_list = acks.get(v, ())
            if any(a[0] == "reject" for a in ack_list):
                continue
            if any(a[0] == "accept" and a[1] in ("ok", "info") for a in ack_list):
                continue
            ds = deliveries.get(v, ())
            if any(d[6] >= limit for d in ds):
                continue  # it may have been archived at the limit
            found.append((w, ds))

        def examples():
            for w, ds in found:
                yield ((f.w_op[w], *[d[2] for d in ds[:5]]),
                       f"{self.write(w)} acknowledged, never accepted nor rejected after the final drain; "
                       + (f"delivered {len(ds)} time(s), last count {ds[-1][6]}" if ds else "never delivered"))

        self.add("share-lost", len(found), examples())
        return len(found)
