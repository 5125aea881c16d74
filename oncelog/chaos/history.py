"""A chaos run's history: loading worker files, pairing operations, flattening into numpy columns.

The format is described in :mod:`oncelog.chaos` (JSON lines of ``invoke`` / ``ok`` / ``fail`` /
``info`` events). This module is sans-IO apart from :func:`load` opening the paths it is given and
:func:`write_lines` appending to one; everything else works on events already in memory.

Three steps:

1. :func:`load` reads events (file paths, JSON lines or dicts), pairs each ``invoke`` with the next
   completion of the same ``f`` *in the same process, in the order the process wrote them* (not in
   time order, so a worker whose wall clock stepped back still pairs right), and turns an invoke
   with no completion (the process died) into an ``info`` operation. ``poll``, ``assign`` and
   ``final-done`` are complete operations on their own. Operations are then ordered by their start
   time (the invoke's, or the event's), ties kept in file order; ``Op.index`` is that position.
2. Each operation gets its process's *assignment session* at the moment the operation completed:
   an ``assign`` starts a new session for its process, and a process's operations before its first
   ``assign`` share one implicit session. Session numbers are unique in the run.
3. :func:`flatten` turns the operations into :class:`Flat`: one numpy column per field for the
   operations, the writes (every ``send`` micro-op) and the reads (every ``poll`` micro-op), with
   partitions interned to small ints and each read mapped to its write by value. Columns are built
   as Python lists and converted once: no per-row numpy call, so 10^6 operations flatten in seconds.

Invariants :func:`load` and :func:`flatten` enforce (a broken history raises :class:`HistoryError`
rather than giving a verdict): a completion follows an invoke of the same ``f`` in its process; a
process has at most one invoke pending; no value is written twice.

Merging an invoke with its completion: an ``ok`` completion's micro-ops are authoritative (every
send acknowledged, with its offset). For ``fail`` and ``info`` the sends are the union of the
completion's and the invoke's (a send the invoke planned may have reached the broker before the
answer was lost), so every value a reader can see has its write.
"""

from __future__ import annotations

import gc
import json
import os
from array import array
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

# Operation kinds (``f``) and outcomes (``type``) as the small ints of the numpy columns.
SEND, TXN, POLL, ASSIGN, FINAL_DONE, SHARE_POLL, SHARE_ACK, SHARE_FINAL_DONE, SHARE_GROUP, CRASH = range(10)
F_NAMES = ("send", "txn", "poll", "assign", "final-done",
           "share-poll", "share-ack", "share-final-done", "share-group", "crash")
F_CODES = {name: code for code, name in enumerate(F_NAMES)}
OK, FAIL, INFO = range(3)
TYPE_NAMES = ("ok", "fail", "info")
TYPE_CODES = {name: code for code, name in enumerate(TYPE_NAMES)}

# Operations written only as ``ok`` (no invoke): what a consumer saw.
_STANDALONE = frozenset(("poll", "assign", "final-done", "share-poll", "share-final-done", "share-group", "crash"))


@contextmanager
def paused_gc():
    """Pause the cyclic garbage collector while millions of small objects are made.

    Those objects hold no cycles, but each collection walks every live one: with GC on, parsing
    10^5 history lines takes ~6x longer (measured: 2.9 s against 0.4 s)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class HistoryError(ValueError):
    """The history breaks the format: the checker refuses to give a verdict on it."""


@dataclass(slots=True)
class Op:
    """One operation: an invoke paired with its completion, or a standalone ``ok`` event.

    ``type`` is the outcome (``ok`` / ``fail`` / ``info``). ``time`` is when it started (the
    invoke's time, or the event's for standalone ops); ``complete_time`` is -1 when the process
    died before completing it. ``value`` is the merged micro-ops (see the module docstring).
    ``event`` is the completion event (or the lone invoke) as written, for the optional keys
    (``abort``, ``id``, ``final``, ``end_offsets``, ``commit_time``). ``seq`` is the position of
    the op's last event in the files as read, which orders a process's ops whatever the clock did.
    """

    index: int
    process: int
    f: str
    type: str
    time: int
    complete_time: int
    value: Any
    session: int
    seq: int
    event: dict


def _events(source: Any) -> Iterator[dict]:
    """Yield event dicts from one source: a path, a JSON line (str/bytes) or a dict."""
    if isinstance(source, dict):
        yield source
        return
    if isinstance(source, bytes):
        source = source.decode()
    if isinstance(source, str) and source.lstrip().startswith("{"):
        yield json.loads(source)
        return
    if isinstance(source, str) and not source.strip():
        return
    with open(source, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    # A worker killed mid-write leaves a torn last line: drop it, refuse any other.
                    rest = fh.read()
                    if rest.strip():
                        raise HistoryError(f"{source}:{n}: not JSON: {e}") from None


def _merge_value(invoke_value: Any, completion_value: Any, outcome: str) -> Any:
    if completion_value is None:
        return invoke_value
    if outcome == "ok" or not invoke_value:
        return completion_value
    seen = {m[2] for m in completion_value if m[0] == "send"}
    extra = [m for m in invoke_value if m[0] == "send" and m[2] not in seen]
    return completion_value + extra if extra else completion_value


def load(paths_or_lines: Iterable[Any]) -> list[Op]:
    """Read a run's events and pair them into operations ordered by start time.

    ``paths_or_lines``: any mix of paths to worker JSONL files, JSON lines (``str`` starting with
    ``{``, or ``bytes``) and event dicts. A single path may be given on its own.
    """
    if isinstance(paths_or_lines, (str, bytes, os.PathLike, dict)):
        paths_or_lines = [paths_or_lines]
    with paused_gc():
        return _load(paths_or_lines)


def _load(paths_or_lines: Iterable[Any]) -> list[Op]:
    pending: dict[int, tuple[dict, int]] = {}  # process -> (invoke event, its seq)
    session_of: dict[int, int] = {}
    sessions = 0
    ops: list[Op] = []
    seq = 0
    for source in paths_or_lines:
        for ev in _events(source):
            seq += 1
            try:
                process, kind, f, t = ev["process"], ev["type"], ev["f"], ev["time"]
            except KeyError as e:
                raise HistoryError(f"event {seq} lacks {e.args[0]!r}: {ev}") from None
            if kind == "invoke":
                if process in pending:
                    raise HistoryError(f"process {process}: invoke of {f} at {t} while "
                                       f"{pending[process][0]['f']} invoked at {pending[process][0]['time']} "
                                       "is not complete")
                pending[process] = (ev, seq)
                continue
            if kind not in TYPE_CODES:
                raise HistoryError(f"event {seq}: unknown type {kind!r}")
            inv = pending.get(process)
            if inv is not None and inv[0]["f"] == f:
                del pending[process]
                invoke = inv[0]
                op = Op(0, process, f, kind, invoke["time"], t,
                        _merge_value(invoke.get("value"), ev.get("value"), kind), -1, seq, ev)
            elif f in _STANDALONE:
                if kind != "ok":
                    raise HistoryError(f"event {seq}: {f} is written as ok only, not {kind}")
                op = Op(0, process, f, kind, t, t, ev.get("value"), -1, seq, ev)
            else:
                raise HistoryError(f"process {process}: {kind} of {f} at {t} without an invoke")
            if f == "assign":
                sessions += 1
                session_of[process] = sessions
            elif process not in session_of:
                sessions += 1
                session_of[process] = sessions
            op.session = session_of[process]
            ops.append(op)
    for process, (ev, s) in pending.items():  # the process died: outcome unknown
        if process not in session_of:
            sessions += 1
            session_of[process] = sessions
        ops.append(Op(0, process, ev["f"], "info", ev["time"], -1, ev.get("value"), session_of[process], s, ev))
    ops.sort(key=lambda o: (o.time, o.seq))
    for i, op in enumerate(ops):
        op.index = i
    return ops


def write_lines(path: str | os.PathLike, events: Iterable[dict]) -> None:
    """Append events to a JSONL history file (one compact JSON object a line)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(ev, separators=(",", ":")) + "\n" for ev in events)


@dataclass
class Flat:
    """A history as numpy columns. Indices: ops by ``Op.index``, writes and reads by position.

    ops:    ``op_process``, ``op_f`` (``SEND``...), ``op_type`` (``OK``/``FAIL``/``INFO``),
            ``op_time`` (start), ``op_complete_time`` (-1: died), ``op_session``, ``op_seq``,
            ``op_abort`` (an abort on purpose), ``op_commit_time`` (the optional ``commit_time``
            of a txn op, -1 when absent), ``op_final`` (an op of a final reader's process).
    writes: ``w_op``, ``w_kind`` (the op's f: ``SEND``/``TXN``), ``w_partition``, ``w_value``,
            ``w_offset`` (-1: not acknowledged, or the client did not say), ``w_outcome`` (the
            op's type), ``w_process``, ``w_time`` / ``w_complete_time`` (the op's).
    reads:  ``r_op``, ``r_process``, ``r_session``, ``r_partition``, ``r_offset``, ``r_value``,
            ``r_time`` (an upper bound of when the record was returned: a poll op's time, a txn
            op's completion; the largest int64 for a txn op whose process died), ``r_in_txn``
            (the read is a micro-op of the txn ``r_op``), ``r_write``
            (index of the write of that value, -1 if no write has it).
    final reader, per partition id: ``final_end`` (the final assign's end offset, -1 when no
            final reader reached it), ``final_time`` (that final assign's time).
    """

    partitions: list[str]
    ops: list[Op]
    op_process: np.ndarray
    op_f: np.ndarray
    op_type: np.ndarray
    op_time: np.ndarray
    op_complete_time: np.ndarray
    op_session: np.ndarray
    op_seq: np.ndarray
    op_abort: np.ndarray
    op_commit_time: np.ndarray
    op_group: np.ndarray  # consume-transform-produce: the consumer group (interned), else -1
    op_final: np.ndarray
    w_op: np.ndarray
    w_kind: np.ndarray
    w_partition: np.ndarray
    w_value: np.ndarray
    w_offset: np.ndarray
    w_outcome: np.ndarray
    w_process: np.ndarray
    w_time: np.ndarray
    w_complete_time: np.ndarray
    r_op: np.ndarray
    r_process: np.ndarray
    r_session: np.ndarray
    r_partition: np.ndarray
    r_offset: np.ndarray
    r_value: np.ndarray
    r_time: np.ndarray
    r_in_txn: np.ndarray
    r_write: np.ndarray
    final_end: np.ndarray
    final_time: np.ndarray
    _sorted_values: np.ndarray
    _sorted_writes: np.ndarray

    def write_of(self, values: np.ndarray | Iterable[int]) -> np.ndarray:
        """Index of the write of each value, -1 for a value no write has."""
        values = np.asarray(values, dtype=np.int64)
        if not len(self._sorted_values):
            return np.full(values.shape, -1, dtype=np.int64)
        pos = np.searchsorted(self._sorted_values, values)
        pos = np.minimum(pos, len(self._sorted_values) - 1)
        return np.where(self._sorted_values[pos] == values, self._sorted_writes[pos], -1)


def flatten(ops: list[Op]) -> Flat:
    """Columns of ``ops`` (as :func:`load` returns them: ``ops[i].index == i``)."""
    with paused_gc():
        return _flatten(ops)


def _flatten(ops: list[Op]) -> Flat:
    pid: dict[str, int] = {}
    partitions: list[str] = []

    def intern(name: str) -> int:
        i = pid.get(name)
        if i is None:
            i = pid[name] = len(partitions)
            partitions.append(name)
        return i

    n = len(ops)
    if any(op.index != i for i, op in enumerate(ops)):
        raise HistoryError("ops[i].index != i: flatten the list load() returned")
    try:
        op_f = [F_CODES[op.f] for op in ops]
        op_type = [TYPE_CODES[op.type] for op in ops]
    except KeyError as e:
        raise HistoryError(f"unknown f or type {e.args[0]!r}") from None
    aborts: list[int] = []
    commit_times: list[tuple[int, int]] = []
    groups: list[tuple[int, int]] = []  # (op, interned consumer group) of consume-transform-produce txns
    group_ids: dict[str, int] = {}
    # Columns as array('q'): extend() converts Python ints at C speed, numpy then wraps the buffer.
    w_part, w_value, w_offset = (array("q") for _ in range(3))
    r_part, r_offset, r_value = (array("q") for _ in range(3))
    w_runs, r_runs = array("q"), array("q")  # (op index, how many) for w_op / r_op by np.repeat
    final_assigns: list[Op] = []
    final_dones: dict[int, Op] = {}
    for i, f in enumerate(op_f):
        op = ops[i]
        value = op.value
        if f == POLL:
            if value:  # the bulk of a history: whole columns per op
                _, parts, offs, vals = zip(*value)
                done = len(r_part)
                try:
                    r_part.extend(map(pid.__getitem__, parts))
                except KeyError:  # a new partition: extend() kept the ids before it; intern the rest
                    r_part.extend(map(intern, parts[len(r_part) - done:]))
                r_runs.extend((i, len(value)))
                r_offset.extend(offs)
                r_value.extend(vals)
        elif f <= TXN:
            event = op.event
            if event.get("abort"):
                aborts.append(i)
            ct = event.get("commit_time")
            if ct is not None:
                commit_times.append((i, ct))
            g = event.get("group")
            if g is not None:
                groups.append((i, group_ids.setdefault(str(g), len(group_ids))))
            if not value:
                continue
            try:  # fast path: acknowledged sends only, every micro-op ["send", p, v, offset]
                names, parts, vals, offs = zip(*value)
            except ValueError:
                names = ("poll",)
            if "poll" not in names and None not in offs:
                done = len(w_part)
                try:
                    w_part.extend(map(pid.__getitem__, parts))
                except KeyError:  # as for polls below
                    w_part.extend(map(intern, parts[len(w_part) - done:]))
                w_runs.extend((i, len(value)))
                w_value.extend(vals)
                w_offset.extend(offs)
                continue
            writes, reads = len(w_part), len(r_part)
            for mop in value:
                name = mop[0]
                if name == "send":
                    p = pid.get(mop[1])
                    w_part.append(intern(mop[1]) if p is None else p)
                    w_value.append(mop[2])
                    off = mop[3] if len(mop) > 3 else None
                    w_offset.append(-1 if off is None else off)
                elif name == "poll" and len(mop) == 4:
                    _, part, off, v = mop
                    p = pid.get(part)
                    r_part.append(intern(part) if p is None else p)
                    r_offset.append(off)
                    r_value.append(v)
            w_runs.extend((i, len(w_part) - writes))
            r_runs.extend((i, len(r_part) - reads))
        elif f == ASSIGN:
            for part in value or ():
                intern(part)
            if op.event.get("final"):
                final_assigns.append(op)
        elif f == FINAL_DONE:
            final_dones[op.process] = op
        # share-* and crash ops: the checker reads them from ``ops`` (see checker.ShareChecks)

    i64 = np.int64
    o_process = np.fromiter((op.process for op in ops), dtype=i64, count=n)
    o_f = np.array(op_f, dtype=np.int8)
    o_type = np.array(op_type, dtype=np.int8)
    o_time = np.fromiter((op.time for op in ops), dtype=i64, count=n)
    o_complete = np.fromiter((op.complete_time for op in ops), dtype=i64, count=n)
    o_session = np.fromiter((op.session for op in ops), dtype=i64, count=n)
    o_seq = np.fromiter((op.seq for op in ops), dtype=i64, count=n)
    o_abort = np.zeros(n, dtype=bool)
    o_abort[np.array(aborts, dtype=i64)] = True
    o_commit = np.full(n, -1, dtype=i64)
    if commit_times:
        ct = np.array(commit_times, dtype=i64)
        o_commit[ct[:, 0]] = ct[:, 1]
    o_group = np.full(n, -1, dtype=i64)
    if groups:
        gs = np.array(groups, dtype=i64)
        o_group[gs[:, 0]] = gs[:, 1]
    final_processes = sorted({op.process for op in final_assigns})
    o_final = np.isin(o_process, np.array(final_processes, dtype=i64))

    def col(a: array) -> np.ndarray:
        return np.frombuffer(a, dtype=i64) if len(a) else np.empty(0, dtype=i64)

    def repeat(runs: array) -> np.ndarray:
        pairs = col(runs).reshape(-1, 2)
        return np.repeat(pairs[:, 0], pairs[:, 1])

    wo, wv = repeat(w_runs), col(w_value)
    order = np.argsort(wv, kind="stable")
    sorted_values = wv[order]
    dup = np.flatnonzero(sorted_values[1:] == sorted_values[:-1])
    if len(dup):
        v = int(sorted_values[dup[0]])
        a, b = (int(wo[order[dup[0]]]), int(wo[order[dup[0] + 1]]))
        raise HistoryError(f"value {v} is written twice (ops {a} and {b}): values must be unique in a run")
    ro, rv = repeat(r_runs), col(r_value)
    rf = o_f[ro]
    flat = Flat(
        partitions=partitions, ops=ops,
        op_process=o_process, op_f=o_f, op_type=o_type, op_time=o_time, op_complete_time=o_complete,
        op_session=o_session, op_seq=o_seq, op_abort=o_abort,
        op_commit_time=o_commit, op_final=o_final, op_group=o_group,
        w_op=wo, w_kind=o_f[wo], w_partition=col(w_part).astype(np.int32), w_value=wv,
        w_offset=col(w_offset), w_outcome=o_type[wo], w_process=o_process[wo],
        w_time=o_time[wo], w_complete_time=o_complete[wo],
        r_op=ro, r_process=o_process[ro], r_session=o_session[ro],
        r_partition=col(r_part).astype(np.int32), r_offset=col(r_offset), r_value=rv,
        # A txn op's reads are known to have happened by its completion; by nothing if it died.
        r_time=np.where(rf == TXN, np.where(o_complete[ro] >= 0, o_complete[ro], np.iinfo(i64).max), o_time[ro]),
        r_in_txn=rf == TXN,
        r_write=np.empty(0, dtype=i64),
        final_end=np.full(len(partitions), -1, dtype=i64), final_time=np.full(len(partitions), -1, dtype=i64),
        _sorted_values=sorted_values, _sorted_writes=order.astype(i64),
    )
    flat.r_write = flat.write_of(rv)
    # The final reader: per partition, the latest final assign whose final-done reached its end.
    for assign in final_assigns:
        done = final_dones.get(assign.process)
        if done is None:
            continue
        reached = done.value or {}
        for part, end in (assign.event.get("end_offsets") or {}).items():
            p = pid.get(part)
            if p is not None and reached.get(part, -1) >= end and assign.time >= flat.final_time[p]:
                flat.final_end[p] = end
                flat.final_time[p] = assign.time
    return flat
