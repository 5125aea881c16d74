"""``oncelog top``: the on-call view of one oncelog broker or any Kafka cluster, read over the
Kafka protocol alone (the project's protocol client, through the functions ``oncelog
groups|transactions`` use), refreshed every ``--interval`` seconds.

It answers, in this order:

* throughput per topic: offsets/s from the change of the sum of the partitions' high watermarks
  between two reads (transaction markers take an offset each, so they count), and log bytes/s
  from the change of the leaders' partition sizes (DescribeLogDirs; absent when the cluster
  refuses it). Internal topics (``__`` names) are left out of this list;
* lag per group: committed offset vs high watermark (what a read_uncommitted consumer has left),
  and vs last stable offset (what a read_committed consumer can still read now);
* open transactions (ListTransactions + DescribeTransactions) with their age and timeout;
* held-back partitions: LSO < HWM, with the oldest open transaction that holds the LSO there
  (DescribeProducers' current_txn_start_offset), named by its transactional id when a coordinator
  knows its producer id (a producer no coordinator knows as open is a hanging transaction).

Three parts, so the arithmetic is tested without a broker: :func:`fetch` (I/O: one read of the
cluster into a :class:`Fetch`), :func:`snapshot` (pure: one or two fetches into a JSON-able dict)
and :func:`render` (rich tables of a snapshot). :func:`run` is the command.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

# Kafka's transaction states in which a transaction is open (its records not yet decided, or its
# markers not yet written): the LSO of its partitions cannot pass its first offset.
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


@dataclass(frozen=True)
class Transaction:
    """An open transaction as its coordinator describes it."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    start_ms: int  # the coordinator's clock; -1: not known
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProducerTxn:
    """A partition's active producer with an open transaction (DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int  # current_txn_start_offset: the LSO cannot pass it
    last_timestamp: int


@dataclass(frozen=True)
class GroupOffsets:
    """A group and the rows of :func:`oncelog.admin.group_offsets` (committed, high watermark,
    lag per partition; a share group's start offset and lag), or the error that stopped them."""

    group_id: str
    group_type: str | None
    state: str | None
    rows: tuple[dict, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Fetch:
    """One read of the cluster. ``offsets``' LSO was asked after the HWM, so a partition under
    plain writes never shows an LSO behind its HWM: only an open transaction holds it back."""

    monotonic: float  # for rates
    wall_ms: int  # for ages (the brokers' clocks are compared with this one)
    offsets: dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (high watermark, LSO)
    sizes: dict[tuple[str, int], int] | None = None  # the leader's log size in bytes; None: not offered
    groups: tuple[GroupOffsets, ...] = ()
    transactions: tuple[Transaction, ...] = ()
    producer_txns: tuple[ProducerTxn, ...] = ()
    errors: tuple[str, ...] = field(default=())


# -- pure: a snapshot of one or two fetches --------------------------------------------------


def rate(before: int | None, after: int | None, seconds: float | None) -> float | None:
    """Per-second change of a counter between two reads; None without two reads, or when the
    counter went down (a topic deleted and made anew, retention deleting segments): no rate then
    rather than a negative one."""
    if before is None or after is None or not seconds or seconds <= 0 or after < before:
        return None
    return (after - before) / seconds


def _topic_totals(f: Fetch) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for (topic, partition), (hwm, lso) in f.offsets.items():
        t = out.setdefault(topic, {"partitions": 0, "end": 0, "stable": 0, "bytes": 0 if f.sizes is not None else None})
        t["partitions"] += 1
        t["end"] += hwm
        t["stable"] += min(lso, hwm)
        if f.sizes is not None:
            t["bytes"] += f.sizes.get((topic, partition), 0)
    return out


def topics(cur: Fetch, prev: Fetch | None = None) -> list[dict]:
    """Throughput of every non-internal topic, sorted by name: the sums of its partitions' high
    watermarks and LSOs, its log bytes, and records/s and bytes/s since ``prev``. A topic absent
    from ``prev`` has no rate (it may be new with data in it already)."""
    seconds = cur.monotonic - prev.monotonic if prev is not None else None
    now, before = _topic_totals(cur), _topic_totals(prev) if prev is not None else {}
    rows = []
    for name in sorted(now):
        if name.startswith("__"):
            continue
        t, b = now[name], before.get(name)
        rows.append({"topic": name, "partitions": t["partitions"], "end_offset": t["end"],
                     "stable_offset": t["stable"], "log_bytes": t["bytes"],
                     "records_per_s": rate(b["end"] if b else None, t["end"], seconds),
                     "bytes_per_s": rate(b["bytes"] if b else None, t["bytes"], seconds)})
    return rows


def group_lag(group: GroupOffsets, offsets: dict[tuple[str, int], tuple[int, int]]) -> dict:
    """A group's lag summed over its partitions. ``lag``: committed vs high watermark; ``lag_stable``:
    committed vs LSO (what a read_committed member can read now; 0 where it committed past the
    LSO). A partition's ends are this fetch's (``offsets``), else the row's own high watermark; a
    partition with no committed offset adds nothing. A share group's lag is its rows' (from the
    share-partition start offsets); it has no committed offsets, so no ``lag_stable``."""
    lag = stable = 0
    share = group.group_type == "share"
    for row in group.rows:
        if share:
            lag += row.get("lag") or 0
            continue
        committed = row.get("committed")
        if committed is None:
            continue
        ends = offsets.get((row["topic"], row["partition"]))
        hwm = ends[0] if ends is not None else row.get("high_watermark")
        if hwm is None:
            continue
        lso = min(ends[1], hwm) if ends is not None else hwm
        lag += max(hwm - committed, 0)
        stable += max(lso - committed, 0)
    return {"group": group.group_id, "type": group.group_type, "state": group.state,
            "partitions": len(group.rows), "lag": None if group.error else lag,
            "lag_stable": None if group.error or share else stable, "error": group.error}


def transactions(cur: Fetch) -> list[dict]:
    """Open transactions, oldest first (then by id); ``overdue``: open longer than its timeout
    (the coordinator should have aborted it)."""
    rows = []
    for t in cur.transactions:
        age = cur.wall_ms - t.start_ms if t.start_ms >= 0 else None
        rows.append({"transactional_id": t.transactional_id, "state": t.state, "producer_id": t.producer_id,
                     "producer_epoch": t.producer_epoch, "age_ms": age, "timeout_ms": t.timeout_ms,
                     "overdue": age is not None and age > t.timeout_ms,
                     "partitions": [{"topic": tp, "partition": p} for tp, p in sorted(t.partitions)]})
    return sorted(rows, key=lambda r: (-(r["age_ms"] if r["age_ms"] is not None else -1), r["transactional_id"]))


def held_back(cur: Fetch) -> list[dict]:
    """Every partition whose LSO is behind its high watermark, sorted by (topic, partition), with
    the oldest open transaction there (the lowest current_txn_start_offset: normally the LSO
    itself), its transactional id when a coordinator lists its producer id as open, and that
    transaction's age. ``first_offset`` is None when DescribeProducers did not name one (the
    transaction ended between the two reads, or the cluster does not offer it)."""
    oldest: dict[tuple[str, int], ProducerTxn] = {}
    for p in cur.producer_txns:
        key = (p.topic, p.partition)
        if key not in oldest or p.first_offset < oldest[key].first_offset:
            oldest[key] = p
    by_pid = {t.producer_id: t for t in cur.transactions}
    rows = []
    for (topic, partition), (hwm, lso) in sorted(cur.offsets.items()):
        if lso >= hwm:
            continue
        p = oldest.get((topic, partition))
        t = by_pid.get(p.producer_id) if p is not None else None
        rows.append({"topic": topic, "partition": partition, "last_stable_offset": lso, "high_watermark": hwm,
                     "held_records": hwm - lso, "first_offset": p.first_offset if p else None,
                     "producer_id": p.producer_id if p else None, "producer_epoch": p.producer_epoch if p else None,
                     "transactional_id": t.transactional_id if t else None,
                     "age_ms": cur.wall_ms - t.start_ms if t is not None and t.start_ms >= 0 else None})
    return rows


def snapshot(cur: Fetch, prev: Fetch | None = None) -> dict:
    """Everything the view shows, JSON-able: ``topics`` (rates since ``prev``), ``groups`` (by
    id), ``transactions`` (open ones), ``held_back`` and the ``errors`` of parts that could not be
    read."""
    return {"time_ms": cur.wall_ms,
            "interval_s": round(cur.monotonic - prev.monotonic, 3) if prev is not None else None,
            "topics": topics(cur, prev),
            "groups": [group_lag(g, cur.offsets) for g in sorted(cur.groups, key=lambda g: g.group_id)],
            "transactions": transactions(cur), "held_back": held_back(cur), "errors": list(cur.errors)}


# -- rendering ---------------------------------------------------------------------------------


def _num(v, fmt: str = "{:,}") -> str:
    return "-" if v is None else fmt.format(v)


def _age(ms: int | None) -> str:
    if ms is None:
        return "-"
    s = ms / 1000
    return f"{s:.1f}s" if s < 120 else f"{s / 60:.1f}m" if s < 7200 else f"{s / 3600:.1f}h"


def _bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return "-"


def render(snap: dict):
    """The snapshot as rich tables, worst first: the busiest topics, the largest lags, the
    oldest transactions, the partitions held back longest. Every name and message the cluster's
    clients chose (topics, group and transactional ids, error text) goes in as a
    :class:`rich.text.Text`, never as markup: a group id ``evil[/]`` would raise rich's
    MarkupError, and ``[bold red]x`` would be restyled."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts = []
    when = time.strftime("%H:%M:%S", time.localtime(snap["time_ms"] / 1000))
    interval = f", rates over {snap['interval_s']:g}s" if snap["interval_s"] else ", no rates (one read)"
    parts.append(Text(f"oncelog top at {when}{interval}", style="bold"))

    t = Table("topic", "partitions", "end offset", "records/s", "bytes/s", "log size", title="throughput",
              title_justify="left")
    for r in sorted(snap["topics"], key=lambda r: (-(r["records_per_s"] or 0), r["topic"])):
        t.add_row(Text(r["topic"]), str(r["partitions"]), _num(r["end_offset"]), _num(r["records_per_s"], "{:,.1f}"),
                  _bytes(r["bytes_per_s"]) + ("/s" if r["bytes_per_s"] is not None else ""), _bytes(r["log_bytes"]))
    parts.append(t)

    g = Table("group", "type", "state", "partitions", "lag", "lag (read_committed)", title="consumer lag",
              title_justify="left")
    for r in sorted(snap["groups"], key=lambda r: (-(r["lag"] or 0), r["group"])):
        g.add_row(Text(r["group"]), Text(r["type"] or "-"), Text(r["state"] or "-"), str(r["partitions"]),
                  Text(r["error"], style="red") if r["error"] else _num(r["lag"]), _num(r["lag_stable"]))
    parts.append(g)

    x = Table("transactional id", "state", "producer id", "epoch", "age", "timeout", "partitions",
              title="open transactions", title_justify="left")
    for r in snap["transactions"]:
        age = _age(r["age_ms"])
        x.add_row(Text(r["transactional_id"]), Text(r["state"]), str(r["producer_id"]), str(r["producer_epoch"]),
                  Text(f"{age} (overdue)", style="red") if r["overdue"] else age, _age(r["timeout_ms"]),
                  Text(", ".join(f"{p['topic']}-{p['partition']}" for p in r["partitions"]) or "-"))
    parts.append(x)

    h = Table("partition", "LSO", "HWM", "held", "oldest txn from", "producer", "transactional id", "age",
              title="held back (LSO < high watermark HWM): the oldest open transaction there", title_justify="left")
    for r in sorted(snap["held_back"], key=lambda r: (-(r["age_ms"] or 0), r["topic"], r["partition"])):
        h.add_row(Text(f"{r['topic']}-{r['partition']}"), _num(r["last_stable_offset"]), _num(r["high_watermark"]),
                  _num(r["held_records"]), _num(r["first_offset"]), _num(r["producer_id"], "{}"),
                  Text(r["transactional_id"]) if r["transactional_id"]
                  else Text("none open (hanging?)", style="red") if r["producer_id"] is not None else "-",
                  _age(r["age_ms"]))
    parts.append(h)
    for e in snap["errors"]:
        parts.append(Text(f"could not read {e}", style="red"))
    return Group(*parts)


# -- I/O: one read of the cluster ----------------------------------------------------------


def _log_sizes(client, leaders: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Each partition's size as its leader reports it (DescribeLogDirs of every broker: a
    follower's copy is the same data, counted once)."""
    from kio.schema.errors import ErrorCode

    from .client.kafka import KafkaProtocolError
    from .client.wire import request_module

    sizes: dict[tuple[str, int], int] = {}
    for node_id in sorted(set(leaders.values())):
        conn = client.node(node_id)
        lo, hi = conn.api_versions.get(35, (None, None))
        if lo is None or lo > 4:
            raise KafkaProtocolError(ErrorCode.unsupported_version, f"DescribeLogDirs on {conn.address}")
        # conn.request, not client.call: the client's version table has no DescribeLogDirs (the
        # version is chosen here from the broker's range), so its check would refuse it.
        try:
            resp = conn.request(request_module(35, min(hi, 4)).DescribeLogDirsRequest(topics=None))
        except (OSError, ConnectionError):
            client.drop(conn)
            raise
        if getattr(resp, "error_code", ErrorCode.none) != ErrorCode.none:
            raise KafkaProtocolError(resp.error_code, f"DescribeLogDirs on {conn.address}")
        for result in resp.results:
            if result.error_code != ErrorCode.none:
                continue
            for t in result.topics:
                for p in t.partitions:
                    # One log directory holds a partition (a future copy, being moved, is not counted).
                    if leaders.get((t.name, p.partition_index)) == node_id and not p.is_future_key:
                        sizes[(t.name, p.partition_index)] = p.partition_size
    return sizes


def _ms(value) -> int:
    """A kio duration or instant in ms (-1 for None: Kafka's "none")."""
    if value is None:
        return -1
    if hasattr(value, "total_seconds"):
        return int(round(value.total_seconds() * 1000))
    return int(round(value.timestamp() * 1000))


class _TopicList:
    """The one AdminClient call :func:`oncelog.admin.open_producer_txns` makes (``list_topics``),
    answered from this read's Metadata: the producers are asked of the same partitions whose
    offsets were read, with no second Metadata request."""

    def __init__(self, md) -> None:
        from types import SimpleNamespace

        from kio.schema.errors import ErrorCode

        self._md = SimpleNamespace(topics={name: SimpleNamespace(partitions=dict(t.partitions))
                                           for name, t in md.items() if t.error == ErrorCode.none})

    def list_topics(self, timeout: float | None = None):
        return self._md


def fetch(client) -> Fetch:
    """One read of the cluster through oncelog's protocol client: Metadata, ListOffsets at both
    isolation levels, DescribeLogDirs, and the groups, transactions and producers requests of
    :mod:`oncelog.admin` (each sent to the broker that answers it). A part that fails (an API the
    cluster does not offer, or refuses) is named in ``errors`` and the others are still read; the
    topic list and the offsets are not optional: their failure raises."""
    from kio.schema.errors import ErrorCode

    from . import admin
    from .client.kafka import LATEST, READ_COMMITTED, READ_UNCOMMITTED

    errors: list[str] = []
    mono, wall = time.monotonic(), int(time.time() * 1000)
    md = client.metadata(None)
    leaders = {(name, p): leader for name, t in md.items() if t.error == ErrorCode.none
               for p, leader in t.partitions.items()}
    # A partition without a leader answers nothing (ListOffsets would wait for one): named, not read.
    offline = sorted(tp for tp, leader in leaders.items() if leader < 0)
    if offline:
        errors.append("offline partitions (no leader): " + ", ".join(f"{t}-{p}" for t, p in offline))
        leaders = {tp: leader for tp, leader in leaders.items() if leader >= 0}
    specs = {tp: LATEST for tp in leaders}
    # The HWM first, then the LSO: a partition under plain writes then shows an LSO at or past the
    # HWM read before it, so only an open transaction makes LSO < HWM (no false hold-back).
    hwms = client.list_offsets(specs, READ_UNCOMMITTED) if specs else {}
    lsos = client.list_offsets(specs, READ_COMMITTED) if specs else {}
    offsets = {tp: (hwms[tp][0], lsos[tp][0]) for tp in hwms if tp in lsos}

    def part(what: str, read):
        try:
            return read()
        except Exception as exc:  # noqa: BLE001 - one part failing leaves the others on screen
            errors.append(f"{what}: {exc}")
            return None

    sizes = part("log sizes (DescribeLogDirs)", lambda: _log_sizes(client, leaders))

    def read_groups():
        out = []
        for g in admin.list_groups(client):
            try:
                desc = admin.describe_group(client, g.group_id)
                rows = admin.group_offsets(client, desc)
                out.append(GroupOffsets(g.group_id, desc.group_type or g.group_type, desc.state, tuple(rows)))
            except Exception as exc:  # noqa: BLE001 - a group gone or refused: shown as its error
                out.append(GroupOffsets(g.group_id, g.group_type, g.state, error=str(exc)))
        return tuple(out)

    groups = part("groups", read_groups) or ()

    def read_transactions():
        ids = sorted({t.transactional_id for t in admin.txn_list(client) if t.transaction_state in OPEN_STATES})
        out = []
        for d in admin.txn_describe(client, ids) if ids else ():
            if d.error_code != ErrorCode.none or d.transaction_state not in OPEN_STATES:
                continue  # expired, or ended between the list and the describe
            out.append(Transaction(d.transactional_id, d.transaction_state, int(d.producer_id),
                                   int(d.producer_epoch), _ms(d.transaction_start_time), _ms(d.transaction_timeout),
                                   tuple(sorted((t.topic, int(p)) for t in d.topics for p in t.partitions))))
        return tuple(out)

    txns = part("transactions (ListTransactions, DescribeTransactions)", read_transactions) or ()
    producers = part("producers (DescribeProducers)", lambda: tuple(
        ProducerTxn(t, p, int(pid), int(epoch), int(start), int(last))
        for t, p, pid, epoch, start, last in admin.open_producer_txns(client, _TopicList(md)))) or ()
    return Fetch(mono, wall, offsets, sizes, groups, txns, producers, tuple(errors))


# -- the command ---------------------------------------------------------------------------


def run(args) -> int:
    """``oncelog top``: a live view until Ctrl-C, or with ``--once`` one snapshot (two reads
    ``--interval`` apart, for the rates; one read with ``--interval 0``) printed as tables or, with
    ``--json``, as one JSON object. Exit 1 when the cluster cannot be read."""
    if args.json and not args.once:
        print("oncelog top: --json needs --once (one snapshot)", file=sys.stderr)
        return 2
    if args.interval < 0:
        print("oncelog top: --interval must be >= 0", file=sys.stderr)
        return 2
    from . import admin
    from .client.kafka import KafkaClient, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker

    failures = (admin.CommandError, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker, OSError,
                ValueError)
    try:
        client = KafkaClient(args.bootstrap, admin._read_command_config(args.command_config), client_id="oncelog-top",
                             timeout=10)
    except failures as exc:
        print(f"oncelog top: {exc}", file=sys.stderr)
        return 1
    try:
        if args.once:
            prev = None
            if args.interval > 0:
                prev = fetch(client)
                time.sleep(args.interval)
            snap = snapshot(fetch(client), prev)
            if args.json:
                print(json.dumps(snap))
            else:
                from rich.console import Console

                # Piped, rich would lay the tables out in 80 columns and cut the ids short.
                Console(width=None if sys.stdout.isatty() else 200).print(render(snap))
            return 0
        return _live(args, client, failures)
    except failures as exc:
        # As admin._fail, but without the diagnosis when it only says the same again.
        said, why = str(exc), admin.diagnose(args)
        print(f"oncelog top: {said}" + (f"; {why}" if why and why != said else ""), file=sys.stderr)
        return 1
    finally:
        client.close()


def _live(args, client, failures) -> int:
    """Refresh until Ctrl-C; a failed read is shown over the last snapshot, and retried."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    prev, shown = None, Text("reading the cluster ...")
    interval = args.interval or 2.0
    try:
        with Live(shown, auto_refresh=False, screen=False) as live:
            while True:
                started = time.monotonic()
                try:
                    cur = fetch(client)
                    shown = render(snapshot(cur, prev))
                    prev = cur
                    live.update(shown, refresh=True)
                except failures as exc:
                    live.update(Group(shown, Text(f"could not read {args.bootstrap}: {exc}", style="red")),
                                refresh=True)
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 0
