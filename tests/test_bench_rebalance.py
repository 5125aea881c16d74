"""``python -m bench rebalance`` (bench/rebalance.py) in a tiny configuration against a real oncelog
broker (the bench starts it): a group of confluent-kafka consumers grows 1 → 3 on 6 partitions with
each protocol (classic eager, classic cooperative-sticky, consumer / KIP-848).

Its figures back the claim that the consumer protocol needs fewer round trips, so the
report must hold what it says: every step ended with the partitions shared out disjointly among all
members, a step's end is after its assignment and the broker's Stable, and the requests counted are
each protocol's own (JoinGroup/SyncGroup for classic — every member rejoins an eager rebalance —
ConsumerGroupHeartbeat only for the consumer protocol). No timing is asserted."""

from __future__ import annotations

import json

import pytest

from bench import rebalance

pytestmark = pytest.mark.e2e  # the bench starts its broker

MEMBERS, PARTITIONS = 3, 6


def test_the_bench_grows_a_group_with_each_protocol_and_counts_its_requests(tmp_path, capsys):
    out = tmp_path / "rebalance.json"
    rc = rebalance.main(["--broker", "oncelog", "--protocols", "classic,classic-coop,consumer",
                         "--members", str(MEMBERS), "--partitions", str(PARTITIONS), "--reps", "1", "--warmup", "0",
                         "--step-pause", "0.2", "--step-timeout", "30", "--json", str(out)])
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    growths = doc["growths"]
    assert [g["errors"] for g in growths] == [[], [], []], printed
    assert rc == 0
    assert {g["protocol"] for g in growths} == {"classic", "classic-coop", "consumer"}
    # The broker ran with the group settings the run's header prints.
    settings = doc["settings"]["oncelog"]
    assert settings["group.initial.rebalance.delay.ms"] == "0"
    assert settings["group.consumer.heartbeat.interval.ms"] == "500"

    for g in growths:
        assert [s["members"] for s in g["steps"]] == list(range(1, MEMBERS + 1))
        assert not g["late_events"], g["late_events"]  # the settled assignment did not move again
        for s in g["steps"]:
            owned = [set(a) for a in s["assignment"]]
            assert len(owned) == s["members"] and all(owned)
            assert sorted(p for a in owned for p in a) == list(range(PARTITIONS))  # each partition once
            assert s["seconds"] >= max(s["assigned_s"], s["stable_s"]) > 0
            assert s["group_requests"] == sum(s["requests"].get(a, 0) for a in rebalance.GROUP_APIS)
            joins, syncs = s["requests"].get("JoinGroup", 0), s["requests"].get("SyncGroup", 0)
            heartbeats = s["requests"].get("ConsumerGroupHeartbeat", 0)
            if g["protocol"] == "consumer":
                assert joins == syncs == s["requests"].get("Heartbeat", 0) == 0
                # the join, and for a later member the heartbeat that brings its partitions after
                # the others released them
                assert heartbeats >= (1 if s["members"] == 1 else 2)
            else:
                assert heartbeats == 0
                # every member joins and syncs (eager: each rebalance; cooperative: twice per join
                # at least for the members that gave partitions up and the new one)
                assert joins >= s["members"] and syncs >= s["members"]
            if s["members"] > 1:
                # some existing member gave partitions up: its revoke was seen within the step
                assert s["revoking_members"] >= 1 and s["noticed_s"] is not None

    rows = {(r["broker"], r["protocol"]): r for r in doc["summary"]}
    assert set(rows) == {("oncelog", p) for p in ("classic", "classic-coop", "consumer")}
    for r in rows.values():
        assert r["repetitions"] == 1 and r["errors"] == []
        assert r["joins_group_requests"] == sum(r["steps"][str(k)]["group_requests"] for k in range(2, MEMBERS + 1))
    # The tables name every protocol and step.
    for label in ("classic, eager range", "classic, cooperative-sticky", "consumer (KIP-848), uniform"):
        assert label in printed
    assert f"→{MEMBERS}" in printed and "group requests" in printed
