"""bench.scaling: its pure parts (CPU lists, py-spy's stacks, pooled figures), the in-process
part (B1) on this tree, and one short cell on the broker as it is and on the threaded-append
prototype (bench/threaded_append.py), checking that every acknowledged record is in the log."""

import os

import pytest

from bench import scaling


def test_cpu_lists():
    assert scaling.parse_cpus("0") == {0}
    assert scaling.parse_cpus("0,2-3") == {0, 2, 3}
    assert scaling.parse_cpus("") is None and scaling.parse_cpus(None) is None


@pytest.mark.parametrize("stack, expected", [
    ("thread (7): MainThread;uv_run (core.c:1);uv__io_poll (linux.c:2);epoll_pwait (libc.so.6)", ("waiting (epoll)", True)),
    ("thread (7): MainThread;Segment.append (oncelog/storage/segment.py:212);os_pwritev (posixmodule.c:1);"
     "pwritev64v2 (libc.so.6)", ("file write (pwritev / pwrite)", True)),
    ("thread (7): MainThread;scan_batches (oncelog/protocol/records.py:169);crc32c_crc32c (_crc32c.c:1);"
     "_crc32c_hw_adler (crc32c.so)", ("CRC-32C (C, GIL released)", True)),
    ("thread (7): MainThread;check_records (oncelog/protocol/records.py:916);_walk_bulk (records.py:851);"
     "array_any (numpy.so)", ("record walk (numpy, GIL held)", False)),
    ("thread (7): MainThread;something_else (x.py:1)", ("other", False)),
])
def test_a_sampled_stack_is_classified_by_its_leaf_then_by_the_python_frame_naming_the_work(stack, expected):
    assert scaling._classify(stack) == expected


def test_raw_counts_keep_the_main_thread_only(tmp_path):
    path = tmp_path / "raw.txt"
    path.write_text("thread (7): MainThread;a (x.py:1);b (x.py:2) 3\n"
                    "thread (8): append-0;c (x.py:3) 5\n"
                    "thread (7): MainThread;a (x.py:1) 2\n")
    assert scaling._raw_counts(str(path), 7) == {"thread (7): MainThread;a (x.py:1);b (x.py:2)": 3,
                                                 "thread (7): MainThread;a (x.py:1)": 2}


def test_a_cell_pools_its_rounds_by_records_over_seconds():
    cell = scaling.Cell("c", ["n"], [None])
    cell.runs = [{"records": 100, "seconds": 1.0, "broker_cpu": 0.5, "client_cpu": 0.25},
                 {"records": 300, "seconds": 2.0, "broker_cpu": 1.0, "client_cpu": 0.5}]
    p = cell.pooled()
    assert p["records_per_s"] == pytest.approx(400 / 3)
    assert p["broker_us_per_record"] == pytest.approx(1.5e6 / 400)
    assert p["by_round"] == [100.0, 150.0]


@pytest.mark.e2e
def test_the_in_process_part_times_appended_requests(tmp_path):
    args = scaling.build_parser().parse_args(["--b1-loops", "1"])
    figures = scaling.part_b1(str(tmp_path), args, records_per_batch=16)  # refuses figures unless all appended
    assert 0 < figures["gil_released_share"] < 1
    assert figures["us_one_thread"]["whole request (handle_frame)"] > 0


@pytest.mark.e2e
@pytest.mark.parametrize("module", [None, ["-m", "bench.threaded_append", "--threads", "2", "--min-bytes", "0", "--"]],
                         ids=["stock", "threaded-append"])
def test_one_cell_acknowledges_only_what_is_in_the_log(tmp_path, module):
    from oncelog.client.wire import RawClient, list_offsets_latest

    from bench.workers import WorkerPool

    broker = scaling.Broker(str(tmp_path), "node", partitions=2, module=module).start()
    pool = WorkerPool(2).start()
    pool.client_cpus = None
    try:
        cell = scaling.Cell("one", ["node"], [{0}])
        run = scaling.run_cell(cell, {"node": broker}, pool, 2, 0.5, "t", os.sched_getaffinity(0), delete=False)
        client = RawClient(broker.bootstrap)
        try:
            stored = sum(list_offsets_latest(client, topic, p) for topic in run["topics"]["node"] for p in range(2))
        finally:
            client.close()
    finally:
        pool.close()
        broker.stop()
    assert run["records"] > 0 and stored == run["records"]
    assert run["broker_cpu"] > 0 and run["client_cpu"] > 0


@pytest.mark.e2e
def test_the_processes_without_clients_append_every_request(tmp_path):
    args = scaling.build_parser().parse_args(["--duration", "0.3", "--rounds", "1"])
    figures = scaling.part_a2(str(tmp_path), args, records_per_batch=16, probe=False)  # refuses lost appends
    assert set(figures) == {"1 process, core 0", "2 processes, core 0", "2 processes, cores 0|1"}
    assert all(f["records_per_s"] > 0 for f in figures.values())
