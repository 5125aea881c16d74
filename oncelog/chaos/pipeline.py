"""``oncelog chaos --pipeline``: the demo's Spark job under the nemesis, proved by the demo's auditor.

The demo already SIGKILLs its driver's whole process group and its broker at moments it picks;
this adds, during its chaos phase, faults from the same seeded nemesis that the demo does not
inject: SIGSTOP/SIGCONT of the broker and of the driver's process group (the JVM and its Python
workers frozen while the broker moves on: transactions time out, the sink's producers are fenced
when it wakes), and SIGKILL of Spark's Python workers (the executor side of a local master: the
task fails and Spark retries it). The verdict is the demo's: the exactly-once audit of the
outputs by an independent read_committed reader, exit 0 only if it held.

The broker's network, disk and clock faults need the chaos run's own broker (behind the proxy,
on a small disk): here they are not applied, and the run says so.
"""

from __future__ import annotations

import os
import random
import signal

from . import nemesis as nem

PIPELINE_KINDS = ("kill", "pause")


def _python_workers(pgid: int) -> list[int]:
    """Spark's Python processes in the driver's group: every Python process but the group's
    leader (the driver program itself) and pyspark.daemon (whose death fails every task of
    the executor at once): its forked workers (same command line, the daemon as parent), the
    data source's planner and commit runners."""
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except (OSError, IndexError, ValueError):
            continue
        if int(fields[2]) == pgid:  # stat's 5th field: the process group (4th: the parent)
            procs[int(pid)] = (int(fields[1]), cmd)
    python = {pid for pid, (_, cmd) in procs.items() if b"python" in cmd.split(b" ")[0] and pid != pgid}
    daemons = {pid for pid in python if b"pyspark.daemon" in procs[pid][1]
               and b"pyspark.daemon" not in procs.get(procs[pid][0], (0, b""))[1]}
    return sorted(python - daemons)


def schedule(seed: int, kinds: tuple[str, ...], duration_s: float) -> list[nem.Fault]:
    """Pauses of the broker or the driver's group (0.5-8 s) and kills of a Python worker."""
    rng = random.Random(seed)
    faults, t = [], rng.uniform(3, 8)
    while kinds and t < duration_s:
        kind = rng.choice(kinds)
        if kind == "pause":
            target, dur = rng.choice(["broker", "driver"]), rng.uniform(0.5, 8.0)
        else:
            target, dur = "python-worker", 0.5
        faults.append(nem.Fault(round(t, 3), kind, target, round(dur, 3)))
        t += dur + rng.uniform(3, 8)
    return faults


def run_pipeline(args, faults: tuple[str, ...], console) -> int:
    from .. import demo
    from ..pipeline.run import Pipeline

    kinds = tuple(k for k in faults if k in PIPELINE_KINDS)
    skipped = [k for k in faults if k not in PIPELINE_KINDS]
    if skipped:
        console.print(f"--pipeline: faults {', '.join(skipped)} need the chaos run's own broker; not applied here",
                      markup=False)
    plan = schedule(args.seed, kinds, args.duration)

    class ChaosPipeline(Pipeline, nem.Targets):
        """The demo's pipeline with the nemesis running through its chaos phase."""

        def run_chaos(self) -> None:
            self.nemesis = nem.Nemesis(plan, self, on_event=lambda text: self.event("warning", f"nemesis: {text}"))
            self.nemesis.start()
            try:
                super().run_chaos()
                # the demo's own faults may end before the nemesis's schedule does
                self.nemesis._thread.join(max(args.duration, 1))
            finally:
                self.nemesis.stop()
            self.event("recovered", f"nemesis done: {self.nemesis.counts() or 'no faults'}"
                                    + (f"; not applied: {self.nemesis.errors}" if self.nemesis.errors else ""))

        def _pid(self, target: str) -> tuple[int, bool]:
            if target == "broker":
                return self.cluster.broker.proc.pid, False
            return self.driver.pgid, True

        def pause(self, target: str) -> None:
            pid, group = self._pid(target)
            (os.killpg if group else os.kill)(pid, signal.SIGSTOP)
            self._paused = (pid, group)

        def resume(self, target: str) -> None:
            pid, group = self._paused
            try:
                (os.killpg if group else os.kill)(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass  # the demo killed it meanwhile

        def kill(self, target: str) -> None:
            import time

            deadline = time.monotonic() + 15  # between micro-batches there may be none: wait for one
            while not (workers := _python_workers(self.driver.pgid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not workers:
                raise RuntimeError("no Spark Python process ran in 15 s")
            os.kill(random.Random(len(workers)).choice(workers), signal.SIGKILL)

        def revive(self, target: str) -> None:
            pass  # Spark starts Python workers itself

    def factory(cfg, **kw):
        if not hasattr(cfg, "seed") or cfg.seed is None:
            cfg.seed = args.seed
        if cfg.bootstrap_server or cfg.broker != "oncelog":
            raise SystemExit("--pipeline runs on the demo's own oncelog broker")
        return ChaosPipeline(cfg, **kw)

    import argparse

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    import shlex

    argv = ["--seed", str(args.seed), *shlex.split(getattr(args, "demo_args", "") or "")]
    demo_args = parser.parse_args(argv + (["--report", args.report] if args.report else []))
    demo_args.kafka_options = {}
    if args.plot:
        demo_args.plot = args.plot
    return demo.run(demo_args, pipeline_factory=factory)
