"""Each rank sees torchrun's variables, its own GPUs and railyard's variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from exec_helpers import NODE, MakeExecutor, logs, py, spec, wait_report

from railyard.exec import ExecutorError, Outcome
from railyard.exec.launch import rank_layout

DUMP_ENV = (
    "import json, os, sys; "
    "open(os.path.join(sys.argv[1], 'env-' + os.environ['RANK'] + '.json'), 'w')"
    ".write(json.dumps(dict(os.environ)))"
)


def test_two_workers_two_gpus_each(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor(gpus=4)
    job = spec(
        tmp_path,
        py(DUMP_ENV, str(tmp_path)),
        workers=2,
        gpus_per_worker=2,
        gpus=(0, 1, 2, 3),
        env={"USER_EXTRA": "1", "RANK": "99"},
        nccl_env={"NCCL_SOCKET_IFNAME": "eth0"},
    )
    handle = executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED

    envs = [json.loads((tmp_path / f"env-{r}.json").read_text()) for r in (0, 1)]
    for rank, env in enumerate(envs):
        assert env["RANK"] == str(rank)  # a user extra cannot rewire ranks
        assert env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["NODE_RANK"] == env["GROUP_RANK"] == "0"
        assert env["NNODES"] == "1"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == str(handle.master_port)
        assert env["TORCHELASTIC_RESTART_COUNT"] == env["RAILYARD_RESTART_COUNT"] == "0"
        assert env["RAILYARD_JOB_ID"] == "job"
        assert env["RAILYARD_CHECKPOINT_DIR"] == str(tmp_path / "ckpt" / "job")
        assert env["RAILYARD_PREEMPT_SIGNAL"] == "SIGUSR1"
        assert env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert env["USER_EXTRA"] == "1"
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1", "2,3"]
    assert (tmp_path / "ckpt" / "job").is_dir()
    assert logs(tmp_path).count("==== railyard") == 2


def test_cpu_job_sees_no_gpu(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor(gpus=0)
    executor.start(spec(tmp_path, py(DUMP_ENV, str(tmp_path)), restart_count=3))
    assert wait_report(executor, "job").restart_count == 3
    env = json.loads((tmp_path / "env-0.json").read_text())
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["RAILYARD_RESTART_COUNT"] == env["TORCHELASTIC_RESTART_COUNT"] == "3"


def test_layout_over_two_nodes(tmp_path: Path) -> None:
    placement = {"a": (0, 1, 2, 3), "b": (4, 5)}
    job = spec(tmp_path, ("true",), workers=3, gpus_per_worker=2, placement=placement)
    slots = rank_layout(job)
    assert [(s.rank, s.node, s.node_rank, s.local_rank, s.gpus) for s in slots] == [
        (0, "a", 0, 0, (0, 1)),
        (1, "a", 0, 1, (2, 3)),
        (2, "b", 1, 0, (4, 5)),
    ]


@pytest.mark.parametrize(
    ("placement", "message"),
    [({"elsewhere": (0,)}, "this is n0"), ({NODE: (7,)}, r"GPUs \[7\] not on a 4-GPU node")],
)
def test_start_rejects_what_the_node_lacks(
    make_executor: MakeExecutor, tmp_path: Path, placement: dict[str, tuple[int, ...]], message: str
) -> None:
    job = spec(tmp_path, ("true",), gpus_per_worker=1, placement=placement)
    with pytest.raises(ExecutorError, match=message):
        make_executor(gpus=4).start(job)
