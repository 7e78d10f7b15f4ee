"""Step time, MFU and throughput of one training split, from kernel shapes and a network model.

Compute efficiency is not a fitted constant. Each kernel of a layer is priced by
railyard.twin.layer: GEMMs by their shape (tiles and waves on the GPU's SMs, railyard.twin.kernels),
fused attention by the published rates of its backend at that sequence length and head
dimension (railyard.twin.attention), element-wise kernels by the bytes the chosen implementation
moves (railyard.twin.implementation), and every kernel by its launch cost. Communication comes
from an injected :class:`CommModel`, so this module holds no network model of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Protocol

from railyard.blueprint.catalog import GPUS, GpuSpec
from railyard.twin.calibration import Calibration
from railyard.twin.fp8 import (
    AMAX_BYTES,
    DELAYED_AMAX_REDUCTIONS,
    cast_bytes,
    cast_kernels,
    recipe_name,
    tp_amax_reductions,
)
from railyard.twin.implementation import Implementation, attention_backend, for_split
from railyard.twin.kernels import SUSTAINED_RATIO, KernelModel, kernel_model
from railyard.twin.layer import (
    LayerWork,
    Work,
    autocast_accumulation_work,
    embedding_work,
    grad_accumulation_work,
    layer_work,
    logits_work,
    optimizer_work,
    weight_tensors,
)
from railyard.twin.memory import MemoryEstimate, estimate_memory
from railyard.twin.models import LlmArch, Parallelism
from railyard.twin.moe import dispatch_s, expert_tp

__all__ = [
    "CommModel",
    "Parallelism",
    "StepEstimate",
    "estimate_step",
    "pipeline_bubble",
    "stage_time_s",
]

# Megatron all-reduces fp32 main grads for bf16 training (its default
# accumulate_allreduce_grads_in_fp32); bf16 parameters are gathered after a sharded step.
GRAD_REDUCE_BYTES = 4.0
PARAM_GATHER_BYTES = 2.0
# Overlapped communication is not free: its kernels take SMs and HBM bandwidth from the compute
# they run beside, which ran 18.9% slower on average (40% at most) across GPT and Llama layers
# on A100, H100, MI250 and MI210 (Agrawal et al., "Characterizing Compute-Communication Overlap
# in GPU-Accelerated Distributed Deep Learning: Performance and Power Implications", arXiv
# 2507.03114, 2025). So each second of communication hidden under compute still costs this much.
OVERLAP_COMPUTE_SLOWDOWN = 0.189


# Gradients are reduced in buckets as backward produces them: Megatron-Core's default bucket is
# max(40,000,000, 1,000,000 x DP size) parameters (megatron/core/distributed/
# distributed_data_parallel_config.py, bucket_size), torch DDP's 25 MB (bucket_cap_mb, PyTorch
# DistributedDataParallel docs). The parameter all-gather of a sharded optimizer uses the same
# buckets, first bucket first.
MCORE_BUCKET_PARAMS = 40_000_000
MCORE_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
TORCH_DDP_BUCKET_BYTES = 25 * 2**20


def _overlapped(
    comm_s: float, compute_s: float, pieces: float | None = None, idle_s: float = 0.0
) -> float:
    """Exposed seconds of ``comm_s`` run beside ``compute_s`` (and ``idle_s`` of waiting).

    ``pieces`` is how many parts the communication is cut into when each part waits for the
    compute that produces it (gradient buckets, tensor-parallel GEMM chunks): a part goes out
    only once its share of the compute is done, so the last part is always exposed and the
    rest hide behind the compute still to come. None: the communication is independent of the
    compute beside it (another micro-batch's) and may hide entirely. The part hidden under
    compute still slows that compute (OVERLAP_COMPUTE_SLOWDOWN); a part hidden in a pipeline
    bubble's idle time slows nothing."""
    window = max(0.0, compute_s) + max(0.0, idle_s)
    if pieces is None:
        exposed = max(0.0, comm_s - window)
    else:
        # part i (1..n) is ready at i x window/n; the link sends parts in order, so the last
        # ends at max over i of (i x window/n + (n - i + 1) x comm/n)
        n = max(1.0, pieces)
        exposed = max(comm_s / n, comm_s - window * (1.0 - 1.0 / n))
    under_compute = max(0.0, compute_s) / window if window > 0 else 0.0
    return exposed + OVERLAP_COMPUTE_SLOWDOWN * (comm_s - exposed) * under_compute


def dp_buckets(params: float, dp_ranks: int, implementation: str) -> int:
    """Gradient buckets of one rank's ``params`` (MCORE_BUCKET_PARAMS, TORCH_DDP_BUCKET_BYTES)."""
    if implementation == "eager":
        per_bucket = TORCH_DDP_BUCKET_BYTES / GRAD_REDUCE_BYTES
    else:
        per_bucket = max(MCORE_BUCKET_PARAMS, MCORE_BUCKET_PARAMS_PER_DP_RANK * dp_ranks)
    return max(1, math.ceil(params / per_bucket))


class CommModel(Protocol):
    """Time of one collective over ``nodes x gpus_per_node`` GPUs (the twin's network model)."""

    def time_s(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        gpus_per_node: int,
        *,
        placement: str = "best",
        algo: str | None = None,
    ) -> float: ...


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """One training step of one split: where the time goes and what it achieves."""

    model: str
    parallel: Parallelism
    gpus: int
    step_time_s: float
    compute_s: float  # kernels on the slowest stage, all micro-batches, no waiting
    bubble_s: float
    tp_comm_s: float  # exposed (context- and expert-parallel traffic included)
    pp_comm_s: float  # exposed
    dp_comm_s: float  # exposed
    optimizer_s: float
    model_flops: float  # per step, all GPUs, no recompute (MFU numerator, PaLM definition)
    hardware_flops: float  # per step, recompute included (Narayanan et al. Table 1)
    tokens_per_step: int
    peak_tflops: float
    memory: MemoryEstimate
    implementation: str = ""
    attention_backend: str = ""
    breakdown: dict[str, float] = field(default_factory=dict)  # seconds per step by category
    stage_times_s: tuple[float, ...] = ()  # one micro-batch, forward + backward, per stage
    moe: bool = False  # a mixture-of-experts model (its own error band)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def bubble_fraction(self) -> float:
        return pipeline_bubble(
            self.parallel.pp, self.parallel.micro_batches, self.parallel.interleave
        )

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops / self.step_time_s / self.gpus / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self.hardware_flops / self.step_time_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation against the bf16 dense peak (PaLM, Chowdhery et al. 2022)."""
        return self.model_tflops_per_gpu / self.peak_tflops

    @property
    def hfu(self) -> float:
        return self.hardware_tflops_per_gpu / self.peak_tflops

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    def time_to_train_s(self, tokens: float) -> float:
        return tokens / self.tokens_per_s


def pipeline_bubble(pp: int, micro_batches: int, interleave: int = 1) -> float:
    """Bubble time over ideal time, (p - 1) / (m v) (Narayanan et al. sections 2.2.1-2.2.2)."""
    return (pp - 1) / (micro_batches * interleave)


def _group(size: int, stride: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs per node) of a group of ``size`` ranks spaced ``stride`` apart."""
    if stride >= gpus_per_node:
        return size, 1
    per_node = min(size, max(1, gpus_per_node // stride))
    return math.ceil(size / per_node), per_node


def gpu_name_of(gpu: GpuSpec) -> str:
    """The catalogue name of a GPU spec (the twin's per-GPU tables are keyed by it)."""
    for name, spec in GPUS.items():
        if spec == gpu:
            return name
    return "H100-SXM-80GB" if gpu.bf16_dense_tflops > 500 else "A100-SXM-80GB"


def kernels_for(
    gpu: GpuSpec,
    gpu_name: str,
    par: Parallelism,
    impl: Implementation,
    calibration: Calibration | None = None,
) -> KernelModel:
    """The kernel rates of this GPU for this run (calibration figures replace published ones)."""
    return _kernels(gpu, gpu_name, par.gpus > 1, par.precision == "fp8", impl.cuda_graphs,
                    calibration)  # fmt: skip


@functools.lru_cache(maxsize=512)
def _kernels(
    gpu: GpuSpec,
    gpu_name: str,
    node_busy: bool,
    fp8: bool,
    cuda_graphs: bool,
    calibration: Calibration | None,
) -> KernelModel:
    overrides: dict[str, float] = {}
    if calibration is not None:
        overrides = {
            "mamf_fraction": calibration.best_gemm_tflops / gpu.bf16_dense_tflops,
            "bytes_s": calibration.hbm_gbyte_s * 1e9,
            "gap_s": calibration.gpu_us_per_kernel * 1e-6,
            "host_s_per_kernel": calibration.host_us_per_kernel * 1e-6,
        }
    return kernel_model(
        gpu_name,
        gpu.bf16_dense_tflops,
        gpu.mem_bw_tbyte_s,
        node_busy=node_busy,
        fp8=fp8,
        cuda_graphs=cuda_graphs,
        **overrides,
    )


@dataclass(frozen=True, slots=True)
class _MicroBatch:
    """One micro-batch's work on one GPU: a layer, and the first and last stage's extras."""

    layer: LayerWork
    layer_step: Work  # forward + backward + recompute + gradient accumulation of one layer
    first_extra: Work  # embedding
    last_extra: Work  # output layer and loss


@functools.lru_cache(maxsize=4096)
def _micro_batch(
    arch: LlmArch,
    split: Parallelism,
    impl: Implementation,
    backend: str,
    km: KernelModel,
    name: str,
    sustained: float,
    calibration: Calibration | None,
    head_km: KernelModel | None = None,
) -> _MicroBatch:
    """The per-micro-batch work depends on few of the split's fields (``split`` carries only
    those); a parallelism search prices thousands of splits that share them, so it is computed
    once per key. The returned Work objects are only read."""
    t = split.tp
    layer = layer_work(arch, split, impl, backend, km, name, sustained=sustained,
                       calibration=calibration)  # fmt: skip
    dense_params = arch.layer_params() - (arch.experts * arch.mlp_matmul_params())
    layer_params = dense_params / t + (
        arch.experts * arch.mlp_matmul_params() / split.ep / expert_tp(split)
        if arch.is_moe
        else 0.0
    )
    layer_step = Work()
    for part in (layer.fwd, layer.bwd, layer.recompute):
        layer_step.extend(part)
    layer_step.extend(grad_accumulation_work(layer_params, weight_tensors(arch), impl, km))
    table = arch.vocab * arch.hidden / t
    first_extra, last_extra = Work(), Work()
    first_extra.extend(embedding_work(arch, split, impl, km))
    first_extra.extend(grad_accumulation_work(table, 1, impl, km))
    last_extra.extend(logits_work(arch, split, impl, km, head_km))
    if split.pp > 1 or not arch.tied_embeddings:
        last_extra.extend(grad_accumulation_work(table, 1, impl, km))
    return _MicroBatch(layer, layer_step, first_extra, last_extra)


def stage_time_s(
    km: KernelModel,
    n_layers: int,
    layer_step: Work,
    drained: tuple[Work, ...],
    extras: list[Work],
) -> float:
    """One micro-batch on one pipeline stage. The host launches ahead of the GPU, so the stage
    takes the longer of its GPU work and its host work, except where a host sync drains the
    launch queue: an MoE layer's forward copies its token counts to the host
    (railyard.twin.moe, MoeWork.host_syncs), so the host cannot run ahead past it, and each
    such part (``drained``: the forward, and its full recompute) takes the longer of its own
    GPU and host time, layer by layer."""
    pooled = Work()
    pooled.extend(layer_step, n_layers)
    for part in drained:
        pooled.extend(part, -n_layers)
    for extra in extras:
        pooled.extend(extra)
    return n_layers * sum(part.time_s(km) for part in drained) + pooled.time_s(km)


def estimate_step(
    arch: LlmArch,
    par: Parallelism,
    gpu: GpuSpec,
    gpus_per_node: int,
    comm: CommModel,
    *,
    gpu_name: str | None = None,
    calibration: Calibration | None = None,
) -> StepEstimate:
    """Estimate one step of ``arch`` trained with split ``par``.

    1. the work of a layer, the embedding, and the output layer with its loss, per micro-batch;
       each pipeline stage's time from its own layer count (uneven stages allowed);
    2. exposed tensor-parallel collectives per layer (all-reduce, or reduce-scatter + all-gather
       with sequence parallelism): 2 forward, 2 backward, 2 more with full recompute
       (Narayanan et al. section 3.1), hidden under the layer's GEMMs when overlapped (slowing
       them: OVERLAP_COMPUTE_SLOWDOWN, as every overlap below); context-
       parallel K/V exchange; expert-parallel all-to-all (dispatch and combine, each way);
    3. pipeline: point-to-point activations per micro-batch boundary and chunk, bubble
       (p - 1)/(m v) of the slowest stage's micro-batch time;
    4. data-parallel gradient reduction after the last micro-batch; when overlapped it hides
       under that micro-batch's backward on this stage (Megatron-Core's --overlap-grad-reduce,
       torch DDP buckets) and the parameter all-gather under the next forward;
    5. the optimizer step (and gradient zeroing) at HBM speed, and the memory of every stage.
    """
    par.check(arch)
    name = gpu_name or gpu_name_of(gpu)
    impl = for_split(par)
    backend = attention_backend(impl, name)
    km = kernels_for(gpu, name, par, impl, calibration)
    sustained = SUSTAINED_RATIO if par.gpus > 1 else 1.0
    m, p, v, t = par.micro_batches, par.pp, par.interleave, par.tp
    key = Parallelism(
        tp=t, cp=par.cp, ep=par.ep, etp=par.etp, pp=min(p, 2), micro_batch=par.micro_batch,
        global_batch=par.micro_batch, sequence_parallel=par.sequence_parallel,
        recompute=par.recompute, fp8_recipe=par.fp8_recipe, dispatcher=par.dispatcher,
    )  # fmt: skip
    # the output layer is not a Transformer Engine module: bf16 under fp8 (railyard.twin.fp8)
    head_km = None
    if par.precision == "fp8":
        head_km = kernels_for(gpu, name, dataclasses.replace(par, precision="bf16"), impl,
                              calibration)  # fmt: skip
    mb = _micro_batch(arch, key, impl, backend, km, name, sustained, calibration, head_km)
    layer, layer_step = mb.layer, mb.layer_step
    first_extra, last_extra = mb.first_extra, mb.last_extra
    stage_layers = par.layers_per_stage(arch)
    dense_params = arch.layer_params() - (arch.experts * arch.mlp_matmul_params())
    table = arch.vocab * arch.hidden / t

    def stage_work(i: int) -> Work:
        w = Work()
        w.extend(layer_step, stage_layers[i])
        if i == 0:
            w.extend(first_extra)
        if i == p - 1:
            w.extend(last_extra)
        return w

    # stages differ only by layer count and by the first and last stage's extras
    drained: tuple[Work, ...] = ()
    if layer.fwd_drains:
        drained = (layer.fwd, layer.recompute) if par.recompute == "full" else (layer.fwd,)
    stage_times = []
    for i, n_layers in enumerate(stage_layers):
        extras = [w for w, is_it in ((first_extra, i == 0), (last_extra, i == p - 1)) if is_it]
        stage_times.append(stage_time_s(km, n_layers, layer_step, drained, extras))

    # 2. tensor, context and expert parallelism per layer
    tokens = par.micro_batch * arch.seq_len / par.cp
    act_bytes = tokens * arch.hidden * 2.0
    per_layer_comm = 0.0
    if t > 1:
        tp_nodes, tp_gpn = _group(t, 1, gpus_per_node)
        if par.sequence_parallel:
            one = comm.time_s("reduce_scatter", act_bytes, tp_nodes, tp_gpn) + comm.time_s(
                "all_gather", act_bytes, tp_nodes, tp_gpn
            )
        else:
            one = comm.time_s("all_reduce", act_bytes, tp_nodes, tp_gpn)
        passes = [(2.0, layer.fwd_gemm_s), (2.0, layer.bwd_gemm_s)]
        if par.recompute == "full":
            passes.append((2.0, layer.fwd_gemm_s))
        for count, gemm_s in passes:
            exposed = count * one
            if par.overlap_tp_comm:  # split into one GEMM chunk per TP rank
                exposed = _overlapped(exposed, gemm_s, pieces=t)
            per_layer_comm += exposed
    # fp8 current scaling with sequence parallelism: the amax of each tensor about to be
    # gathered is all-reduced over the TP group first, and its cast waits (railyard.twin.fp8)
    amax = tp_amax_reductions(par.fp8_recipe, par.sequence_parallel, t)
    if par.precision == "fp8" and amax["fwd"] + amax["bwd"]:
        tp_nodes, tp_gpn = _group(t, 1, gpus_per_node)
        fwd_count = amax["fwd"] * (2 if par.recompute == "full" else 1)
        per_layer_comm += (fwd_count + amax["bwd"]) * comm.time_s(
            "all_reduce", AMAX_BYTES, tp_nodes, tp_gpn
        )
    # context parallelism: K and V gathered forward, their grads reduce-scattered backward,
    # hidden under attention when it is longer (ring attention)
    if par.cp > 1:
        kv_bytes = 2.0 * tokens * arch.n_kv_heads * arch.head_dim * 2.0 / t
        cp_nodes, cp_gpn = _group(par.cp, t, gpus_per_node)
        cp_s = comm.time_s("all_gather", kv_bytes * par.cp, cp_nodes, cp_gpn)
        cp_s += comm.time_s("reduce_scatter", kv_bytes * par.cp, cp_nodes, cp_gpn)
        per_layer_comm += _overlapped(cp_s, 0.5 * (layer.fwd.gpu_s + layer.bwd.gpu_s))
    # expert parallelism: dispatch and combine all-to-alls of the routed token copies, forward
    # and backward (and again with full recompute), over ep ranks spaced tp x cp apart
    if arch.is_moe and par.ep > 1:
        ep_nodes, ep_gpn = _group(par.ep, expert_tp(par), gpus_per_node)
        count = 4 + (2 if par.recompute == "full" else 0)
        ep_s = count * dispatch_s(
            arch, par, tokens, ep_nodes, ep_gpn,
            lambda size, nodes, gpn: comm.time_s("alltoall", size, nodes, gpn),
        )  # fmt: skip
        if par.overlap_ep_comm:
            ep_s = _overlapped(ep_s, layer.expert_gemm_s)
        per_layer_comm += ep_s
    tp_exposed = [n * per_layer_comm for n in stage_layers]

    # 3. pipeline point-to-point: activations split over TP ranks (Narayanan et al. 4.1)
    pp_exposed = 0.0
    if p > 1:
        crosses = t * par.cp * par.dp >= gpus_per_node
        nodes, gpn = (2, 1) if crosses else (1, 2)
        hop = comm.time_s("broadcast", act_bytes / t, nodes, gpn)
        pp_exposed = 2.0 * v * hop * (OVERLAP_COMPUTE_SLOWDOWN if par.overlap_pp_comm else 1.0)
    # fp8 delayed scaling: each micro-batch's forward and backward reduce the amaxes of every
    # fp8 tensor (input, weight, output gradient of each GEMM) over the amax group
    amax_s = 0.0
    if par.precision == "fp8" and recipe_name(par.fp8_recipe) == "delayed":
        group = t * par.dp * par.cp
        if group > 1:
            amax_nodes, amax_gpn = _group(group, 1, gpus_per_node)
            amax_bytes = AMAX_BYTES * 3 * 4 * max(stage_layers)
            amax_s = DELAYED_AMAX_REDUCTIONS * comm.time_s(
                "all_reduce", amax_bytes, amax_nodes, amax_gpn
            )
    per_stage = [stage_times[i] + tp_exposed[i] + pp_exposed + amax_s for i in range(p)]
    slowest = max(range(p), key=lambda i: per_stage[i])
    per_micro = per_stage[slowest]
    bubble_s = (p - 1) / v * per_micro

    # 4. data parallelism over ranks spaced tp*cp apart (Megatron's rank order), for the stage
    # holding the most parameters; expert weights reduce over the dp x cp / ep ranks sharing them
    dense_per_layer = dense_params / t
    expert_per_layer = (
        arch.experts * arch.mlp_matmul_params() / par.ep / expert_tp(par) if arch.is_moe else 0.0
    )
    last_table = table if (p > 1 or not arch.tied_embeddings) else 0.0

    def stage_params(i: int) -> tuple[float, float]:
        tables = (table if i == 0 else 0.0) + (last_table if i == p - 1 else 0.0)
        n_layers = stage_layers[i]
        return n_layers * dense_per_layer + tables, n_layers * expert_per_layer

    # the heaviest stage: the first or the last (tables) or one with the most layers
    most = max(range(p), key=stage_layers.__getitem__)
    heaviest = max({0, p - 1, most}, key=lambda i: sum(stage_params(i)))
    dense_p, expert_p = stage_params(heaviest)
    dp_ranks = par.dp * par.cp
    sharded = par.distributed_optimizer or par.zero_stage >= 1
    dp_exposed = 0.0
    groups = ((dense_p, dp_ranks, t), (expert_p, par.expert_dp, expert_tp(par) * par.ep))
    for params, ranks, stride in groups:
        if ranks <= 1 or params <= 0:
            continue
        dp_nodes, dp_gpn = _group(ranks, stride, gpus_per_node)
        grad_bytes = params * GRAD_REDUCE_BYTES
        if sharded:
            reduce_s = comm.time_s("reduce_scatter", grad_bytes, dp_nodes, dp_gpn)
            gather_s = comm.time_s("all_gather", params * PARAM_GATHER_BYTES, dp_nodes, dp_gpn)
        else:
            reduce_s = comm.time_s("all_reduce", grad_bytes, dp_nodes, dp_gpn)
            gather_s = 0.0
        if par.zero_stage >= 3:  # weights gathered again for every forward and backward
            gather_s += (
                2.0 * m * comm.time_s("all_gather", params * PARAM_GATHER_BYTES, dp_nodes, dp_gpn)
            )
        if par.overlap_dp_comm:
            # a bucket goes out when its gradients are done: under the last micro-batch's
            # backward, and in a pipeline also in the cool-down's idle time, which Megatron-Core
            # uses by reducing each model chunk after its last backward; the gather runs in the
            # next step's forward and warm-up idle time alike
            n_layers = stage_layers[heaviest]
            fwd_s, bwd_s = layer.fwd.gpu_s, layer.bwd.gpu_s + layer.recompute.gpu_s
            cool_s = bubble_s * bwd_s / (fwd_s + bwd_s)
            buckets = dp_buckets(params, ranks, impl.name)
            reduce_s = _overlapped(reduce_s, n_layers * bwd_s, buckets, idle_s=cool_s)
            gather_s = _overlapped(
                gather_s, n_layers * fwd_s * (m if par.zero_stage >= 3 else 1), buckets,
                idle_s=bubble_s - cool_s,
            )  # fmt: skip
        dp_exposed += reduce_s + gather_s

    # 5. optimizer on this rank's shard, gradient buffer zeroed once per step
    shard = (dense_p / (dp_ranks if sharded else 1)) + (
        expert_p / (par.expert_dp if sharded else 1)
    )
    tensors = stage_layers[heaviest] * weight_tensors(arch) + 2
    opt = optimizer_work(dense_p + expert_p, shard, tensors, impl, km)
    accumulate = autocast_accumulation_work(dense_p + expert_p, tensors, impl, km, m)
    if km.operand_bytes == 1.0:
        # fp8 weights are cast once per step, kept for the later micro-batches (railyard.twin.fp8)
        accumulate.add(
            "elementwise", km.stream_s((dense_p + expert_p) * cast_bytes(par.fp8_recipe)),
            tensors * cast_kernels(par.fp8_recipe),
        )  # fmt: skip
    optimizer_s = opt.time_s(km)
    accumulate_s = accumulate.time_s(km)

    step_s = m * per_micro + bubble_s + dp_exposed + accumulate_s + optimizer_s
    tokens_per_step = par.global_batch * arch.seq_len
    busy = stage_work(slowest)
    breakdown = {k: m * s for k, s in busy.seconds.items()}
    # the GPU waits for the host on the slowest stage (launches, and drained MoE forwards)
    stage_idle = max(0.0, stage_times[slowest] - busy.gpu_s - busy.kernels * km.gap_s)
    breakdown["launch_idle"] = m * stage_idle + opt.host_idle_s(km) + accumulate.host_idle_s(km)
    breakdown["kernel_gaps"] = (m * busy.kernels + accumulate.kernels) * km.gap_s
    breakdown["optimizer"] = breakdown.get("optimizer", 0.0) + opt.gpu_s
    breakdown["elementwise"] = breakdown.get("elementwise", 0.0) + accumulate.gpu_s
    breakdown |= {
        "tp_cp_ep_comm": m * tp_exposed[slowest],
        "pp_comm": m * pp_exposed,
        "bubble": bubble_s,
        "dp_comm": dp_exposed,
    }
    return StepEstimate(
        model=arch.name,
        parallel=par,
        gpus=par.gpus,
        step_time_s=step_s,
        compute_s=m * stage_times[slowest],
        bubble_s=bubble_s,
        tp_comm_s=m * tp_exposed[slowest],
        pp_comm_s=m * pp_exposed,
        dp_comm_s=dp_exposed,
        optimizer_s=optimizer_s,
        model_flops=arch.model_flops_per_token() * tokens_per_step,
        hardware_flops=arch.hardware_flops_per_token(par.recompute) * tokens_per_step,
        tokens_per_step=tokens_per_step,
        peak_tflops=gpu.bf16_dense_tflops,
        memory=estimate_memory(arch, par, gpu, gpu_name=name),
        implementation=impl.name,
        attention_backend=backend,
        breakdown=breakdown,
        stage_times_s=tuple(per_stage),
        moe=arch.is_moe,
    )
