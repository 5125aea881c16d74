"""``oncelog chaos``: a Jepsen-class workload, nemesis and checker for oncelog and any Kafka cluster.

Modules (I/O only where named):

* ``history``  — the history format (below) and its flattening into numpy columns (sans-IO).
* ``checker``  — anomalies by class from a flattened history (sans-IO, vectorised; SCCs by scipy).
* ``workload`` — producer / consumer / consume-transform-produce worker processes writing history.
* ``proxy``    — the fault proxy (Kafka framing aware): delay, drop, reset mid-request, blackhole, hold.
* ``disk``     — a small filesystem for the broker's data dir and a ballast that fills it.
* ``nemesis``  — faults scheduled at random from a seed: kill, pause, net, disk, clock.
* ``run``      — one chaos run: broker, proxy, workers, nemesis, final read, checker, report.
* ``pipeline`` — ``--pipeline``: the demo's Spark job under the nemesis.
* ``cli``, ``soak`` — the command, and totals over several reports.

History format
==============
A history is a sequence of JSON objects ("ops"), one per line, in the order they happened in
each worker process; a run's history is the merge of every worker's file ordered by ``time``.
Every op has::

    {"process": int,              # a worker incarnation: a restarted worker gets a new number
     "type": "invoke"|"ok"|"fail"|"info",
     "f": "send"|"txn"|"poll"|"assign"|"final-done"|"share-poll"|"share-ack"|...,
     "time": int,                 # nanoseconds, time.time_ns() of the worker (one machine)
     "value": ...}

An ``invoke`` is followed, in the same process, by exactly one completion (``ok``, ``fail`` or
``info``) of the same ``f`` — unless the process died, in which case the checker treats the
operation as ``info`` (its outcome unknown). ``assign`` and ``poll`` are written as ``ok`` only
(no invoke): they describe what a consumer saw.

Micro-operations (Jepsen's Kafka workload shape; ``partition`` is ``"topic/partition"``, values
are integers unique in the whole run, so every read maps to its one write):

* ``["send", partition, value]`` in an invoke; ``["send", partition, value, offset]`` in a
  completion (the offset the broker acknowledged; ``null`` — the only unknown — when it was not).
* ``["poll", partition, offset, value]`` — one record a read_committed consumer returned.

Operations:

* ``f: "send"`` — a non-transactional idempotent produce of one or more sends; ``ok`` = every
  send acknowledged (with offsets), ``fail`` = definitely not written, ``info`` = unknown.
* ``f: "txn"`` — a transaction: sends, and for consume-transform-produce the polls it read
  (``["poll", ...]`` micro-ops, listed before its sends, in the order they were read).
  ``ok`` = the commit was acknowledged; ``fail`` = definitely aborted (an abort acknowledged,
  including the ones the workload aborts on purpose: then ``"abort": true`` is on the op);
  ``info`` = unknown (commit attempted, answer lost; or the process died).
  A txn op may carry ``"id": "<transactional.id>"`` and, on its completion, ``"commit_time"``:
  ``time_ns()`` just before the commit was requested (no read can see its writes before it).
  A consume-transform-produce txn carries ``"group": "<group.id>"``: its polls are records the
  group consumed, and two committed transactions of one group must never both read one record.
* ``f: "poll"`` — ``value`` is a list of ``["poll", ...]`` micro-ops returned by one consumer
  poll, outside any transaction; its ``time`` is taken after the poll returned. The consumer's
  position per partition only moves forward within one *assignment session*; a consumer that
  seeks back (consume-transform-produce after an abort) writes a new ``assign`` first.
* ``f: "assign"`` — ``value`` is the list of partitions the consumer process now owns; it starts
  a new assignment session for that process (every partition of it), ending the previous one.
  A consumer that assigns partitions itself writes one ``assign`` before its first poll.

Share groups (``--share-consumers``; the micro-ops name the partition as above):

* ``f: "share-poll"`` (``ok`` only, with ``"since"``: ``time_ns()`` before the poll began) —
  ``value`` is a list of ``["deliver", partition, offset, value, delivery_count]``: the records one
  ShareConsumer.poll returned.
* ``f: "share-ack"`` — an invoke listing ``["ack", partition, offset, value, kind, delivery_count]``
  (``kind`` ``accept``/``release``/``reject``), written before the acknowledgements are given and
  committed (commit_sync); the completion lists them again, each with its outcome appended
  (``ok`` = durable, ``fail`` = refused by the broker, ``info`` = unknown); its type is that outcome
  when all agree, else ``info``. A process that died leaves the invoke alone: every one unknown.
* ``f: "share-final-done"`` (``ok``) — the share group's final drain ended; ``value``
  ``{"drained": bool, "quiet_s": s}``: whether nothing more arrived for ``s`` seconds.
* The run's own ops (process 0, ``ok``): ``f: "share-group"`` with ``{"group", "topics",
  "delivery_count_limit", "isolation"}``, and ``f: "crash"`` (``value`` ``"broker"`` or
  ``"node-<k>"``) at each broker or node SIGKILL (or exit by itself). Written only with share
  consumers.

Polls by the run's final reader (which reads every partition to its end after the faults heal)
are ``f: "poll"`` ops of a process whose first op is ``{"f": "assign", ..., "final": true}``;
the final assign also carries ``"end_offsets": {partition: high watermark}`` and its last op
``{"f": "final-done", "type": "ok", "value": {partition: position reached}}``.
"""
