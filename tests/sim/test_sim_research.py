"""Issue 56 item 6, the simulator as a research tool: a flat cluster without a blueprint,
a trace's arrivals rescaled to a load, Gavel's trace format, per-job records and Gavel's
steady-state window."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from railyard.sim import sweep
from railyard.sim.arrivals import offered_load, rescale_load
from railyard.sim.cluster import flat_nodes, gpu_flavor
from railyard.sim.gavel import throughputs
from railyard.sim.jobrecords import parse_window, window
from railyard.sim.traces import TraceError, load_trace
from railyard.sim.workload import TraceJob, Workload

ROOT = Path(__file__).resolve().parents[2]
GAVEL = ROOT / "examples" / "traces" / "gavel_small.trace"


def gavel_line(*fields: object) -> str:
    return "\t".join(map(str, fields)) + "\n"


# -- a flat cluster -----------------------------------------------------------------------------


def test_flat_nodes_are_alike_and_named_in_order():
    nodes = flat_nodes(40, 4, gpu_flavor("a100"))
    assert [n.name for n in nodes[:3]] == ["n0", "n1", "n2"]
    assert {(n.gpus, n.flavor) for n in nodes} == {(4, "A100-SXM-80GB")}
    assert nodes[31].path != nodes[32].path  # leaf groups of 32 nodes


def test_an_unknown_or_ambiguous_gpu_names_the_choices():
    with pytest.raises(ValueError, match="hint: one of H100-SXM-80GB"):
        gpu_flavor("V100")
    with pytest.raises(ValueError, match="several"):
        gpu_flavor("H")  # H100 and H200


# -- load -----------------------------------------------------------------------------------------


def four_jobs() -> Workload:
    jobs = [TraceJob(str(i), submit_s=100.0 * i, gpus=2, runtime_s=300.0) for i in range(4)]
    return Workload.of("four", jobs)


def test_offered_load_is_rate_times_mean_gpu_time_over_gpus():
    # 3 gaps over 300 s: 0.01 jobs/s x 600 GPU-s each / 8 GPUs
    assert offered_load(four_jobs(), 8) == pytest.approx(0.75)


@pytest.mark.parametrize("load", [0.25, 0.75, 1.5, 3.0])
def test_rescaled_arrivals_offer_the_load_asked_and_keep_the_jobs(load: float):
    out = rescale_load(four_jobs(), 8, load)
    assert offered_load(out, 8) == pytest.approx(load)
    assert [(j.id, j.gpus, j.runtime_s) for j in out.jobs] == [
        (j.id, j.gpus, j.runtime_s) for j in four_jobs().jobs
    ]
    gaps = {round(b.submit_s - a.submit_s, 6) for a, b in zip(out.jobs, out.jobs[1:], strict=False)}
    assert gaps == {round(100.0 * 0.75 / load, 6)}


def test_a_deadline_keeps_its_distance_from_submission():
    jobs = [replace(j, deadline_s=j.submit_s + 50) for j in four_jobs().jobs]
    out = rescale_load(Workload.of("d", jobs), 8, 1.5)
    assert all(j.deadline_s == pytest.approx(j.submit_s + 50) for j in out.jobs)


def test_a_trace_without_an_arrival_rate_cannot_be_rescaled():
    at_once = Workload.of("burst", [TraceJob(str(i), 0.0, 1, 60.0) for i in range(3)])
    with pytest.raises(ValueError, match="no arrival rate to rescale"):
        rescale_load(at_once, 8, 1.0)


def test_load_rescales_a_trace_in_a_run():
    """The bug: --load on a trace was ignored (the same JCT at every load)."""
    base = sweep.Scenario("", "fifo", trace=str(GAVEL), trace_format="gavel", nodes=1)
    light = sweep.run_scenario(replace(base, trace_load=0.3))
    heavy = sweep.run_scenario(replace(base, trace_load=3.0))
    assert light["offered_load"] == pytest.approx(0.3)
    assert heavy["offered_load"] == pytest.approx(3.0)
    assert heavy["jct"]["mean_s"] > light["jct"]["mean_s"]
    assert light["blueprint"] == "flat-1x8-H100-SXM-80GB"
    assert light["gpus"] == 8


# -- Gavel's trace format -------------------------------------------------------------------------


def test_the_example_gavel_trace_reads_with_gavels_throughput_table():
    """Run times from Gavel's published V100 rates (they were assumed figures: ResNet-18 at
    10 steps/s on one GPU, 80 on eight; Gavel measured 24.09 and 162.09)."""
    w = load_trace(GAVEL, "gavel")
    assert len(w.jobs) == 12
    first = w.jobs[0]  # ResNet-18 (batch size 64), 36,000 steps on 1 V100
    assert (first.id, first.gpus, first.submit_s) == ("0", 1, 0.0)
    assert first.runtime_s == pytest.approx(36000 / 24.0932, rel=1e-5)
    assert throughputs()[("ResNet-18 (batch size 64)", 1)] == pytest.approx(24.0932)
    big = next(j for j in w.jobs if j.gpus == 8)  # the table's own 8-GPU rate
    assert big.runtime_s == pytest.approx(144000 / 162.092, rel=1e-5)
    assert len({j.user for j in w.jobs}) == 12  # each job its own user, as Gavel's fairness


def test_a_duration_column_overrides_the_assumed_throughput(tmp_path: Path):
    trace = tmp_path / "t.trace"
    trace.write_text(
        gavel_line("Unknown (batch size 1)", "cmd", "wd", "--steps", 0, 10, 2, 1, -1, 5, 1234.5)
        + gavel_line("LM (batch size 20)", "cmd", "wd", "--steps", 1, 800, 1, 1, -1, 9)
    )
    jobs = load_trace(trace, "gavel").jobs
    assert [(j.id, j.gpus) for j in jobs] == [("0", 2), ("1", 1)]
    assert [j.runtime_s for j in jobs] == pytest.approx([1234.5, 800 / 64.7425])
    assert [j.submit_s for j in jobs] == [0.0, 4.0]  # shifted to start at 0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (gavel_line("LM", "c", "w", "-s", 1, 100, 1, 1, -1), ":1: row: 9 tab-separated fields"),
        (gavel_line("LM", "c", "w", "-s", 1, 100, 0, 1, -1, 0), ":1: scale_factor: must be"),
        (gavel_line("LM", "c", "w", "-s", 2, 100, 1, 1, -1, 0), ":1: needs_data_dir: not 0 or 1"),
        (gavel_line("BERT", "c", "w", "-s", 1, 100, 1, 1, -1, 0), "no throughput for 'BERT'"),
        (gavel_line("LM", "c", "w", "-s", 1, "x", 1, 1, -1, 0), ":1: total_steps: not a number"),
    ],
)
def test_bad_gavel_lines_name_line_and_field(tmp_path: Path, line: str, message: str):
    trace = tmp_path / "bad.trace"
    trace.write_text(line)
    with pytest.raises(TraceError, match="hint: ") as err:
        load_trace(trace, "gavel")
    assert message in str(err.value)


def test_gavels_seven_field_philly_traces_read_as_its_parser_read_them(tmp_path: Path):
    """Gavel's Philly-derived traces (scheduler/traces/msr) have seven fields: job_type,
    command, num_steps_arg, needs_data_dir, total_steps, arrival_time, scale_factor. A
    scale factor past the table's 8 GPUs runs at the 8-GPU rate scaled linearly; a scale
    factor of 0 is skipped and counted, as Gavel's parser skipped it."""
    trace = tmp_path / "vc.trace"
    trace.write_text(
        gavel_line("LM (batch size 20)", "cd %s && python3 t.py", "--steps", 1, 6474, 6.0, 1)
        + gavel_line("ResNet-18 (batch size 128)", "cmd", "--num_steps", 1, 162092, 0.0, 16)
        + gavel_line("LM (batch size 20)", "cmd", "--steps", 1, 10, 9.0, 0)
    )
    w = load_trace(trace, "gavel")
    assert [(j.gpus, j.submit_s) for j in w.jobs] == [(16, 0.0), (1, 6.0)]
    assert [j.runtime_s for j in w.jobs] == pytest.approx([500.0, 100.0], rel=1e-4)
    assert w.skipped == {"no GPUs (scale_factor 0)": 1}


def test_the_shipped_trace_slices_match_their_index():
    """The converted slices under railyard/data/traces are what traces.json says they are,
    each naming its source and licence: Gavel's Philly-derived VCs and Alibaba's openb."""
    index = json.loads((ROOT / "src/railyard/data/traces/traces.json").read_text())
    assert len(index) >= 3
    sources = {"gavel": "stanford-futuredata/gavel", "openb": "alibaba/clusterdata"}
    assert {t["name"].split("-")[0] for t in index} == set(sources)
    for t in index:
        shipped = ROOT / "src/railyard/data/traces" / f"{t['name']}.csv"
        if not t.get("shipped", True):  # its terms allow research use, not redistribution
            assert not shipped.exists()
            assert t["make"].startswith("python benchmarks/convert_")
            continue
        w = load_trace(shipped, "railyard")
        assert len(w.jobs) == t["jobs"] <= 5000
        assert max(j.gpus for j in w.jobs) == t["widest_gpus"] <= 8 * t["nodes"]
        assert w.gpu_s() / 3600 == pytest.approx(t["gpu_hours"], rel=1e-3)
        assert sources[t["name"].split("-")[0]] in t["source"]
        assert t["licence"]
        if t["name"].startswith("gavel"):
            assert "MIT" in t["licence"]


# -- the window and the per-job records -----------------------------------------------------------


def test_a_window_is_k_to_l_minus_one_in_arrival_order():
    assert parse_window("2:5") == (2, 5)
    assert window(list("abcdefg"), (2, 5)) == ["c", "d", "e"]  # type: ignore[arg-type]
    for bad in ("5:2", "3:3", "-1:4", "4", "a:b"):
        with pytest.raises(ValueError, match=r"hint: e\.g\. 1000:2000"):
            parse_window(bad)


def test_a_measured_run_counts_only_its_window_and_records_every_job():
    s = sweep.Scenario(
        "", "fifo", trace=str(GAVEL), trace_format="gavel", nodes=1, measure=(3, 9),
        job_records=True,
    )  # fmt: skip
    out = sweep.run_scenario(s)
    records = out["job_records"]
    assert out["jobs"] == 6
    assert out["jct"]["jobs"] == 6
    assert out["measured"] == {"first": 3, "end": 9}
    assert [r["measured"] for r in records] == [False] * 3 + [True] * 6 + [False] * 3
    jcts = [r["jct_s"] for r in records if r["measured"]]
    assert out["jct"]["mean_s"] == pytest.approx(sum(jcts) / 6)
    for r in records:
        assert r["wait_s"] == pytest.approx(r["start_s"] - r["submit_s"])
        assert r["jct_s"] == pytest.approx(r["end_s"] - r["submit_s"])
    whole = sweep.run_scenario(replace(s, measure=None, job_records=False))
    assert whole["jobs"] == 12
    assert "job_records" not in whole
    assert whole["utilization"] == pytest.approx(out["utilization"])  # the whole run's
