"""One chaos run: broker (local, or any cluster), fault proxy, workers, nemesis, final read, check.

Life of a run (``ChaosRun.execute``):

1. The broker: locally, ``oncelog serve`` with its data dir on a small filesystem (when disk
   faults are on) and advertising the fault proxy's address (when net faults are on), so every
   client connection goes through the proxy. With ``bootstrap`` the cluster is someone else's:
   only the workers can be faulted. With ``nodes`` > 1 the local broker is a cluster
   (``serve --nodes N``): node ``k`` listens on a fixed port ``B+k-1`` (so a node restarted by
   the cluster's supervisor comes back where clients know it) and, with net faults, advertises
   ``P+k-1``, where proxy ``k`` of a :class:`~oncelog.chaos.proxy.ProxyGroup` forwards to it;
   the workers bootstrap from every node's address. A node that exits without the nemesis
   killing it (the cluster's supervisor restarts it silently) is a failure of the run, as the
   single broker exiting by itself is; so is a killed node that never registers again.
2. Two topics (``chaos-<id>`` and its ``-out`` for consume-transform-produce), then one worker
   process per slot (:mod:`oncelog.chaos.workload`); a slot whose process dies is restarted as
   a new process, unless the nemesis killed it (then it is revived when the fault ends).
3. The nemesis runs its seeded schedule for ``duration_s``; then everything is healed, the
   workers are asked to stop, and a final reader reads every partition to its end.
4. The history (every worker's JSONL) is checked; the report has the anomalies by class, the
   fault windows, counts, and throughput/latency per second.

Files of a run live in ``work_dir``: ``history/<process>.jsonl``, ``specs/``, ``broker.log``,
``report.json`` (unless another path is given).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from . import nemesis as nem
from .workload import WorkerSpec

# share.session.timeout.ms (Kafka's default and least value) and a margin: a share member that
# died without leaving is gone from its group after this.
SHARE_SESSION_TIMEOUT_NS = 47_000_000_000
SHARE_LOCK_MS = 15_000  # the share group's share.record.lock.duration.ms: Kafka's least

# Two consume-transform-produce members: rebalances between them, and a paused one is a zombie
# its group must fence (KIP-447: the generation in TxnOffsetCommit).
ROLES_DEFAULT = {"producer": 2, "txn": 2, "ctp": 2, "group": 2, "reader": 1}


@dataclass
class ChaosOptions:
    duration_s: float = 60.0
    faults: tuple[str, ...] = nem.KINDS
    seed: int = 1
    bootstrap: str | None = None           # any Kafka cluster: workload and checker only
    client_config: dict = field(default_factory=dict)
    work_dir: str | None = None
    partitions: int = 4
    roles: dict = field(default_factory=lambda: dict(ROLES_DEFAULT))
    disk_bytes: int = 96 << 20
    final_deadline_s: float = 60.0
    broker_env: dict = field(default_factory=dict)  # e.g. ONCELOG_FAULT for sensitivity tests
    fsync: str = "always"
    stop_timeout_s: float = 40.0   # workers asked to stop get this long, then SIGKILL
    nodes: int = 1                 # the local broker as a cluster of this many node processes
    node_restart_timeout_s: float = 60.0  # a killed node not registered again by then: a failure
    share_consumers: int = 0       # share-group members (KIP-932) reading the topic; 0: none
    share_delivery_limit: int = 5  # the share group's share.delivery.count.limit


class _Slot:
    def __init__(self, name: str, role: str, index: int) -> None:
        self.name, self.role, self.index = name, role, index
        self.proc: subprocess.Popen | None = None
        self.process = -1
        self.state = "running"  # running | killed | paused
        self.incarnations = 0


class ChaosRun(nem.Targets):
    def __init__(self, options: ChaosOptions, say=print) -> None:
        self.o = options
        self.say = say
        self.local = options.bootstrap is None
        self.work_dir = options.work_dir or tempfile.mkdtemp(prefix="oncelog-chaos-")
        os.makedirs(os.path.join(self.work_dir, "history"), exist_ok=True)
        os.makedirs(os.path.join(self.work_dir, "specs"), exist_ok=True)
        self.run_id = f"{options.seed}-{int(time.time())}"
        self.topic, self.out_topic = f"chaos-{self.run_id}", f"chaos-{self.run_id}-out"
        self.slots: dict[str, _Slot] = {}
        self._next_process = 0
        self._lock = threading.RLock()
        self._stopping = False
        self.broker = self.proxy = self.disk = self.ballast = None
        self.clock_file = os.path.join(self.work_dir, "clock-offset-ms")
        self.broker_paused = False
        self.broker_killed = False
        self.restarts: dict[str, int] = {}
        self.broker_exits: list[dict] = []  # the local broker (or a node) ending by itself: never expected
        self.node_pids: dict[int, int] = {}  # a cluster's nodes as last seen alive: node id -> pid
        self.nodes_down: dict[int, int] = {}  # node id -> the pid that died (killed, or by itself)
        self.data_dir = os.path.join(self.work_dir, "disk", "data")
        self.share_group = f"chaos-{self.run_id}-share"
        self._run_history = None  # history/0.jsonl: the run's own ops (share group, broker crashes)
        # The last time a share consumer died without leaving its group: the member stays (and keeps
        # its partitions) until its session times out, so the final drain waits for that first.
        self.share_orphan_ns: int | None = None

    # -- set-up ---------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        if not self.local:
            return self.o.bootstrap
        if self.proxy is not None:
            return self.proxy.address
        if self.o.nodes > 1:  # every node: a worker started while node 1 is down still connects
            return ",".join(f"{self.broker.host}:{self.broker.port + k}" for k in range(self.o.nodes))
        return self.broker.bootstrap

    def _start_broker(self) -> None:
        from ..process import BrokerProcess
        from ..process import free_ports
        from .proxy import FaultProxy, ProxyGroup, free_port

        kinds = set(self.o.faults)
        data_root = os.path.join(self.work_dir, "disk")
        os.makedirs(data_root, exist_ok=True)
        if "disk" in kinds:
            from .disk import Ballast, SmallDisk

            self.disk = SmallDisk(data_root, self.o.disk_bytes)
            self.disk.__enter__()
            self.ballast = Ballast(os.path.join(data_root, "ballast"))
        extra = []
        clustered = self.o.nodes > 1
        if "net" in kinds:
            if clustered:
                self.proxy = ProxyGroup(self.o.nodes, free_ports(self.o.nodes), seed=self.o.seed)
                extra = ["--advertise", self.proxy.proxies[0].address]  # node k: its port + k-1
            else:
                self.proxy = FaultProxy(listen_port=free_port(), seed=self.o.seed)
                extra = ["--advertise", self.proxy.address]
        env = dict(self.o.broker_env)
        if "clock" in kinds:
            with open(self.clock_file, "w") as f:
                f.write("0")
            env["ONCELOG_FAULT_CLOCK"] = self.clock_file
        self.broker = BrokerProcess(self.data_dir, fsync=self.o.fsync, extra_args=extra, env=env,
                                    log_path=os.path.join(self.work_dir, "broker.log"),
                                    group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000,
                                    nodes=self.o.nodes, port=free_ports(self.o.nodes) if clustered else 0)
        self.broker.start(timeout=120.0 if clustered else 30.0)
        self._learn_nodes()
        if self.proxy is not None:
            self.proxy.upstream_port = self.broker.port
            self.proxy.start()

    def _create_topics(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self.o.client_config})
        rf = 1 if self.local else -1
        futures = admin.create_topics([NewTopic(t, self.o.partitions, rf) for t in (self.topic, self.out_topic)],
                                      operation_timeout=30)
        for f in futures.values():
            f.result(60)
        # Wait until every partition has a leader (Kafka answers CreateTopics before that).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            md = admin.list_topics(timeout=10)
            ok = all(t in md.topics and len(md.topics[t].partitions) == self.o.partitions
                     and all(p.leader >= 0 for p in md.topics[t].partitions.values())
                     for t in (self.topic, self.out_topic))
            if ok:
                return
            time.sleep(0.2)
        raise RuntimeError(f"topics {self.topic} were not ready in 60 s")

    # -- workers --------------------------------------------------------------------------------

    def _spec(self, slot: _Slot, process: int) -> WorkerSpec:
        return WorkerSpec(
            role=slot.role, process=process, bootstrap=self.bootstrap, topic=self.topic,
            partitions=self.o.partitions, history=os.path.join(self.work_dir, "history", f"{process}.jsonl"),
            seed=self.o.seed * 1000 + process, out_topic=self.out_topic if slot.role in ("ctp", "final") else "",
            group=self.share_group if slot.role.startswith("share") else f"chaos-{self.run_id}-{slot.role}",
            transactional_id=f"chaos-{self.run_id}-{slot.name}",
            client=dict(self.o.client_config), final_deadline_s=self.o.final_deadline_s,
            not_before_ns=self._share_not_before() if slot.role == "share-final" else 0)

    def _spawn(self, slot: _Slot) -> None:
        with self._lock:
            self._next_process += 1
            process = self._next_process
        spec = self._spec(slot, process)
        path = os.path.join(self.work_dir, "specs", f"{process}.json")
        with open(path, "w") as f:
            f.write(spec.to_json())
        log = open(os.path.join(self.work_dir, "workers.log"), "ab")
        slot.proc = subprocess.Popen([sys.executable, "-m", "oncelog.chaos.workload", path],
                                     stdout=log, stderr=log, start_new_session=True)
        log.close()
        slot.process = process
        slot.incarnations += 1
        slot.state = "running"

    def _record(self, f: str, value) -> None:
        """An op of the run itself (process 0) in the history: only with share consumers."""
        if self._run_history is not None:
            self._run_history.op("ok", f, value)

    def _share_not_before(self) -> int:
        """When the final drain may call the group drained: every record lock the workers took has
        expired (a record fetched but never returned to the application stays acquired until its
        lock expires: seen with librdkafka), and every member that died has timed out."""
        t = time.time_ns() + SHARE_LOCK_MS * 1_000_000 + 1_000_000_000
        if self.share_orphan_ns is not None:
            t = max(t, self.share_orphan_ns + SHARE_SESSION_TIMEOUT_NS)
        return t

    def _share_orphan(self, slot: _Slot) -> None:
        if slot.role == "share":
            self.share_orphan_ns = time.time_ns()

    def _setup_share_group(self) -> None:
        """The share group reads from the beginning, read_committed, with the run's delivery limit;
        its settings go into the history (the checker needs the limit and the topic)."""
        from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                           ResourceType)

        from .workload import History

        settings = {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed",
                    "share.record.lock.duration.ms": str(SHARE_LOCK_MS),
                    "share.delivery.count.limit": str(self.o.share_delivery_limit)}
        res = ConfigResource(ResourceType.GROUP, self.share_group, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self.o.client_config})
        for fut in admin.incremental_alter_configs([res]).values():
            fut.result(60)
        self._run_history = History(os.path.join(self.work_dir, "history", "0.jsonl"), 0)
        self._record("share-group", {"group": self.share_group, "topics": [self.topic],
                                     "delivery_count_limit": self.o.share_delivery_limit,
                                     "isolation": "read_committed"})

    def _start_workers(self) -> None:
        roles = dict(self.o.roles)
        if self.o.share_consumers > 0:
            self._setup_share_group()
            roles["share"] = self.o.share_consumers
        for role, n in roles.items():
            for i in range(n):
                name = f"{role}-{i}"
                self.slots[name] = _Slot(name, role, i)
                self._spawn(self.slots[name])

    def _supervise(self) -> None:
        """Restart a worker that exited by itself (a fatal client error) as a new process; a
        local broker that exited by itself is a failure of the run (recorded, then restarted so
        the workload goes on)."""
        while not self._stopping:
            with self._lock:
                b = self.broker
                if self.local and b is not None and not self.broker_killed and b.proc is not None \
                        and b.proc.poll() is not None and not self._stopping:
                    self.broker_exits.append({"time": time.time_ns(), "code": b.proc.returncode,
                                              "log": b.tail_log(20)})
                    self._record("crash", "broker")
                    self.say(f"the broker exited by itself (code {b.proc.returncode}): a failure; restarting it")
                    b.restart()
                    self._learn_nodes()
                self._watch_nodes()
                for slot in self.slots.values():
                    if slot.state == "running" and slot.proc is not None and slot.proc.poll() is not None \
                            and not self._stopping:
                        self._share_orphan(slot)
                        self.restarts[slot.name] = self.restarts.get(slot.name, 0) + 1
                        self._spawn(slot)
            time.sleep(0.5)

    def _stop_workers(self) -> None:
        for slot in self.slots.values():
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.o.stop_timeout_s
        for slot in self.slots.values():
            if slot.proc is None:
                continue
            try:
                slot.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait()
                self._share_orphan(slot)

    # -- a cluster's nodes -----------------------------------------------------------------------

    def _registered_pid(self, node_id: int) -> int | None:
        from ..cluster import read_registration

        doc = read_registration(self.data_dir, node_id)
        pid = doc.get("pid") if doc else None
        return pid if isinstance(pid, int) and self._is_node_process(pid) else None

    def _is_node_process(self, pid: int) -> bool:
        """``pid`` is a live child of this run's cluster supervisor: never signal a pid from a
        file that is stale (reused by another process, or a zombie the supervisor has not reaped)."""
        sup = self.broker.proc if self.broker is not None else None
        if sup is None or sup.poll() is not None:
            return False
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return False
        return fields[0] != "Z" and int(fields[1]) == sup.pid

    def _learn_nodes(self) -> None:
        """After the cluster (re)started: every node's pid from its registration."""
        if self.o.nodes <= 1:
            return
        with self._lock:
            self.nodes_down.clear()
            self.node_pids = {k: pid for k in range(1, self.o.nodes + 1)
                              if (pid := self._registered_pid(k)) is not None}

    def _watch_nodes(self) -> None:
        """(Under the lock.) A node that died without the nemesis killing it is a failure; a
        node that is down and has registered again (a new live pid) is up."""
        if self.o.nodes <= 1 or self.broker_killed or self.broker is None or self._stopping:
            return
        for k in range(1, self.o.nodes + 1):
            known = self.node_pids.get(k)
            if k not in self.nodes_down and known is not None and not self._is_node_process(known):
                if self.broker.proc.poll() is not None:
                    return  # the whole cluster went: the broker's own check records it
                self.nodes_down[k] = known
                self._record("crash", f"node-{k}")
                self.broker_exits.append({"time": time.time_ns(), "node": k, "code": None,
                                          "log": self.broker.tail_log(20)})
                self.say(f"node {k} (pid {known}) exited by itself: a failure; its supervisor restarts it")
            if k in self.nodes_down:
                pid = self._registered_pid(k)
                if pid is not None and pid != self.nodes_down[k]:
                    self.node_pids[k] = pid
                    del self.nodes_down[k]

    def _node_signal(self, sig: int) -> None:
        """Every live node of the cluster gets ``sig`` (pause, resume, clock reload)."""
        for k in range(1, self.o.nodes + 1):
            pid = self._registered_pid(k)
            if pid is not None:
                os.kill(pid, sig)

    def kill_node(self, target: str) -> None:
        node_id = int(target.rsplit("-", 1)[1])
        with self._lock:
            pid = self._registered_pid(node_id)
            if pid is None:
                raise RuntimeError(f"node {node_id} has no live registered process to kill")
            self.nodes_down[node_id] = pid  # first: the watch must not take it for a crash
            self._record("crash", f"node-{node_id}")
            os.kill(pid, signal.SIGKILL)

    def revive_node(self, target: str) -> None:
        """The cluster's supervisor restarts a killed node; wait until it registered again (a
        new pid, live) and accepts connections on its port. Not back in time: a failure."""
        import socket

        node_id = int(target.rsplit("-", 1)[1])
        deadline = time.monotonic() + self.o.node_restart_timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if node_id not in self.nodes_down:  # the watch saw it back
                    pid = self.node_pids.get(node_id)
                else:
                    pid = self._registered_pid(node_id)
                    pid = pid if pid is not None and pid != self.nodes_down[node_id] else None
            if pid is not None:
                try:
                    socket.create_connection((self.broker.host, self.broker.port + node_id - 1), 1).close()
                except OSError:
                    pass
                else:
                    with self._lock:
                        self.node_pids[node_id] = pid
                        self.nodes_down.pop(node_id, None)
                    return
            time.sleep(0.1)
        self.broker_exits.append({"time": time.time_ns(), "node": node_id, "code": None,
                                  "log": f"node {node_id} killed by the nemesis did not register again in "
                                         f"{self.o.node_restart_timeout_s:.0f} s\n" + self.broker.tail_log(20)})
        raise RuntimeError(f"node {node_id} did not come back in {self.o.node_restart_timeout_s:.0f} s")

    # -- nemesis targets ------------------------------------------------------------------------

    def kill(self, target: str) -> None:
        if target == "broker":
            with self._lock:
                self.broker_killed = True  # first: the supervisor must not take it for a crash
                self._record("crash", "broker")
                self.share_orphan_ns = None  # oncelog keeps share-group members in memory only
                self.broker.kill()
            return
        with self._lock:
            slot = self.slots[target]
            slot.state = "killed"
            self._share_orphan(slot)
            if slot.proc.poll() is None:  # else it ended by itself just now: revive makes the next one
                try:
                    os.killpg(slot.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            slot.proc.wait()

    def revive(self, target: str) -> None:
        if target == "broker":
            with self._lock:
                self.broker.restart()
                self._learn_nodes()
                self.broker_killed = False
            return
        with self._lock:
            self._spawn(self.slots[target])

    def pause(self, target: str) -> None:
        if target == "broker":
            if self.o.nodes > 1:  # the cluster: every node (its supervisor only waits on them)
                self._node_signal(signal.SIGSTOP)
            else:
                os.kill(self.broker.proc.pid, signal.SIGSTOP)
            self.broker_paused = True
            return
        with self._lock:
            slot = self.slots[target]
            if slot.proc.poll() is not None:  # it ended by itself (the supervisor is due): pause the next
                self._spawn(slot)
            slot.state = "paused"
            os.killpg(slot.proc.pid, signal.SIGSTOP)

    def resume(self, target: str) -> None:
        if target == "broker":
            if self.o.nodes > 1:
                self._node_signal(signal.SIGCONT)
            else:
                os.kill(self.broker.proc.pid, signal.SIGCONT)
            self.broker_paused = False
            return
        with self._lock:
            slot = self.slots[target]
            try:
                os.killpg(slot.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            slot.state = "running"

    def net(self, detail: dict) -> None:
        mode = detail["mode"]
        if mode == "delay":
            self.proxy.delay(detail["seconds"])
        elif mode == "drop":
            self.proxy.drop(detail["rate"])
        elif mode == "reset":
            self.proxy.reset(detail["rate"])
        else:
            client = detail.get("client")
            if client is not None:  # the worker's clients send client.id chaos-<role>-<process>
                slot = self.slots[client]
                client = f"chaos-{slot.role}-{slot.process}"
            self.proxy.blackhole(detail["direction"], client_id=client)

    def heal_net(self) -> None:
        self.proxy.heal()

    def fill_disk(self) -> None:
        self.ballast.fill()

    def free_disk(self) -> None:
        self.ballast.release()

    def jump_clock(self, ms: int) -> None:
        try:
            current = int(open(self.clock_file).read().strip() or 0)
        except (OSError, ValueError):
            current = 0
        with open(self.clock_file, "w") as f:
            f.write(str(current + ms))
        if self.o.nodes > 1:  # every node reloads the offset (the supervisor has no clock to move)
            self._node_signal(signal.SIGUSR2)
        elif self.broker.proc is not None and self.broker.proc.poll() is None:
            os.kill(self.broker.proc.pid, signal.SIGUSR2)

    def _heal_all(self) -> None:
        if self.local:
            if self.broker_paused:
                self.resume("broker")
            if self.broker_killed or (self.broker.proc is not None and self.broker.proc.poll() is not None):
                self.broker.restart()
                self._learn_nodes()
                self.broker_killed = False
            if self.proxy is not None:
                self.proxy.heal()
            if self.ballast is not None:
                self.ballast.release()
            deadline = time.monotonic() + self.o.node_restart_timeout_s
            while self.nodes_down and time.monotonic() < deadline:  # a node the supervisor restarts
                with self._lock:
                    self._watch_nodes()
                time.sleep(0.1)
        with self._lock:
            for slot in self.slots.values():
                if slot.state == "paused":
                    self.resume(slot.name)
                elif slot.state == "killed":
                    self._spawn(slot)

    # -- the run --------------------------------------------------------------------------------

    def execute(self) -> dict:
        t_start = time.time_ns()
        supervisor = None
        try:
            if self.local:
                self._start_broker()
            self._create_topics()
            self.say(f"topics {self.topic}, {self.out_topic} ({self.o.partitions} partitions) on {self.bootstrap}")
            self._start_workers()
            supervisor = threading.Thread(target=self._supervise, name="chaos-supervisor", daemon=True)
            supervisor.start()
            kinds = nem.available(self.o.faults, local=self.local, nodes=self.o.nodes)
            plan = nem.schedule(self.o.seed, kinds, self.o.duration_s, sorted(self.slots), broker=self.local,
                                nodes=self.o.nodes)
            self.nemesis = nem.Nemesis(plan, self, on_event=lambda text: self.say(f"nemesis: {text}"))
            self.say(f"{len(self.slots)} workers; {len(plan)} faults scheduled over {self.o.duration_s:.0f} s "
                     f"(seed {self.o.seed}, kinds {','.join(kinds) or 'none'})")
            self.nemesis.start()
            deadline = time.monotonic() + self.o.duration_s
            while time.monotonic() < deadline:
                time.sleep(0.5)
            self.nemesis.stop()
            self._heal_all()
            self._stopping = True
            supervisor.join(5)
            self._stop_workers()
            self.say("workload stopped; final read of every partition")
            self._final_read()
            if self.o.share_consumers > 0:
                self.say("final drain of the share group")
                self._final_read("share-final")
        except BaseException:
            if getattr(self, "nemesis", None) is not None:
                self.nemesis.stop(5)
            self._shutdown()
            raise
        finally:
            self._stopping = True
            for slot in self.slots.values():
                if slot.proc is not None and slot.proc.poll() is None:
                    try:
                        os.killpg(slot.proc.pid, signal.SIGCONT)
                        os.killpg(slot.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self._stopping = True
        try:
            return self._check(t_start)
        finally:
            self._shutdown()

    def _final_read(self, role: str = "final") -> None:
        slot = _Slot(f"{role}-0", role, 0)
        self.slots[slot.name] = slot
        self._spawn(slot)
        try:
            slot.proc.wait(self.o.final_deadline_s + 60)
        except subprocess.TimeoutExpired:
            slot.proc.kill()

    def _check(self, t_start: int) -> dict:
        from . import history as hist_mod
        from .checker import check

        paths = sorted(os.path.join(self.work_dir, "history", f)
                       for f in os.listdir(os.path.join(self.work_dir, "history")))
        ops = hist_mod.load(paths)
        result = check(hist_mod.flatten(ops))
        windows = getattr(self, "nemesis", None).windows if hasattr(self, "nemesis") else []
        return {
            "seed": self.o.seed, "duration_s": self.o.duration_s, "nodes": self.o.nodes if self.local else None, "bootstrap": self.bootstrap if not self.local else "oncelog",
            "topics": [self.topic, self.out_topic], "work_dir": self.work_dir, "started_ns": t_start,
            "faults": windows, "fault_counts": self.nemesis.counts() if hasattr(self, "nemesis") else {},
            "nemesis_errors": self.nemesis.errors if hasattr(self, "nemesis") else [],
            "worker_restarts": self.restarts, "processes": self._next_process, "broker_exits": self.broker_exits,
            "proxy": None if self.proxy is None else {
                "counts": self.proxy.counts,
                "connections_per_node": getattr(self.proxy, "connections_per_node", lambda: None)()},
            "ok": result.ok and not self.broker_exits, "result": result.to_json(), "series": series(ops),
        }

    def _shutdown(self) -> None:
        """Stop the proxy and the broker, unmount the small disk; safe to call twice."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            proxy.close()
        broker, self.broker = self.broker, None
        if broker is not None:
            if self.broker_paused and broker.proc is not None and broker.proc.poll() is None:
                if self.o.nodes > 1:
                    self.broker = broker
                    self._node_signal(signal.SIGCONT)
                    self.broker = None
                else:
                    os.kill(broker.proc.pid, signal.SIGCONT)
            broker.stop()
        disk, self.disk = self.disk, None
        if disk is not None:
            if self.ballast is not None:
                self.ballast.release()
            disk.__exit__(None, None, None)


def series(ops) -> dict:
    """Per second (from the first op): completed sends and transactions by outcome, and the
    latency p50/p95 (invoke to completion) of those completed in that second."""
    done = [op for op in ops if op.f in ("send", "txn") and op.complete_time > 0]
    if not ops:
        return {"t0_ns": 0, "seconds": [], "ok": [], "fail": [], "info": [], "p50_ms": [], "p95_ms": []}
    t0 = min(op.time for op in ops)
    buckets: dict[int, dict] = {}
    for op in done:
        b = buckets.setdefault((op.complete_time - t0) // 1_000_000_000, {"ok": 0, "fail": 0, "info": 0, "lat": []})
        b[op.type] += 1
        b["lat"].append((op.complete_time - op.time) / 1e6)
    seconds = list(range(int(max(buckets, default=0)) + 1))

    def pct(values, q):
        if not values:
            return None
        values = sorted(values)
        return round(values[min(int(q * len(values)), len(values) - 1)], 2)

    return {"t0_ns": t0, "seconds": seconds,
            **{k: [buckets.get(s, {}).get(k, 0) for s in seconds] for k in ("ok", "fail", "info")},
            "p50_ms": [pct(buckets.get(s, {}).get("lat", []), 0.5) for s in seconds],
            "p95_ms": [pct(buckets.get(s, {}).get("lat", []), 0.95) for s in seconds]}


def plot(report: dict, path: str) -> None:
    """Throughput and latency over time, fault windows shaded by kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report["series"]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(11, 6))
    ax1.plot(s["seconds"], s["ok"], label="ok ops/s", color="tab:green")
    ax1.plot(s["seconds"], s["info"], label="unknown ops/s", color="tab:orange")
    ax1.plot(s["seconds"], s["fail"], label="failed ops/s", color="tab:red")
    ax1.set_ylabel("operations / s")
    ax2.plot(s["seconds"], [v if v is not None else float("nan") for v in s["p50_ms"]], label="p50")
    ax2.plot(s["seconds"], [v if v is not None else float("nan") for v in s["p95_ms"]], label="p95")
    ax2.set_ylabel("latency (ms)")
    ax2.set_yscale("log")
    ax2.set_xlabel("seconds")
    colors = {"kill": "red", "pause": "purple", "net": "blue", "disk": "brown", "clock": "gray", "kill-node": "darkred"}
    seen = set()
    for w in report["faults"]:
        a, b = (w["start"] - s["t0_ns"]) / 1e9, (w["end"] - s["t0_ns"]) / 1e9
        for ax in (ax1, ax2):
            ax.axvspan(a, max(b, a + 0.2), color=colors.get(w["kind"], "gray"), alpha=0.15,
                       label=w["kind"] if ax is ax1 and w["kind"] not in seen else None)
        seen.add(w["kind"])
        detail = w["detail"] or {}
        what = w["target"] if w["kind"] in ("kill", "pause", "kill-node") else " ".join(
            str(detail[k]) for k in ("mode", "client") if detail.get(k))
        if what:  # which process, or which network fault
            ax1.annotate(what, (a, 1.0), xycoords=("data", "axes fraction"), xytext=(1, -2),
                         textcoords="offset points", fontsize=6, rotation=90, va="top", color="dimgray")
    ax1.legend(loc="upper right", fontsize=8)
    ax2.legend(loc="upper right", fontsize=8)
    verdict = "no anomalies" if report["ok"] else "ANOMALIES"
    fig.suptitle(f"oncelog chaos, seed {report['seed']}: {verdict}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
