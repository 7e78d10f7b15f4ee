"""Time of one kernel on one GPU: GEMMs by shape, memory-bound streams, and launch costs.

A GEMM is cut into output tiles that the GPU's streaming multiprocessors (SMs) work on in waves;
the last wave may leave SMs idle (wave quantization) and a matrix edge may fill a tile only in part
(tile quantization), as NVIDIA's "Matrix Multiplication Background User's Guide"
(docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication) explains. Each tile
then streams through its k dimension after a pipeline fill; where the last wave would leave SMs
idle, stream-K decomposition shares the k iterations of all tiles evenly instead. So a GEMM of
2,048 tokens or more runs near the card's best burst matmul rate and a small one far below it:
efficiency comes from the shape, not from one constant. Element-wise kernels move their bytes at
HBM speed. Every kernel also costs a GPU-side gap and, in eager PyTorch, host time to launch it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from railyard.twin.links import gpu_arch

# Streaming multiprocessors: A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper),
# H100 SXM5 and H200 132 (NVIDIA H100 Tensor Core GPU Architecture whitepaper), B200 148
# (NVIDIA Blackwell architecture technical brief), L40S / RTX 6000 Ada 142 (Ada Lovelace
# architecture whitepaper).
SMS_BY_ARCH = {"ampere": 108, "hopper": 132, "blackwell": 148, "ada": 142}

# Best burst matmul rate measured on each part as a fraction of its dense bf16 peak ("MAMF",
# S. Bekman, ml-engineering, compute/accelerator/README.md, MAMF table): A100 SXM 86.9%,
# H100 SXM 80.3%, B200 77.6%; the median 80.3% for a part the table lacks.
MAMF_FRACTION_BY_ARCH = {"ampere": 0.869, "hopper": 0.803, "blackwell": 0.776}
MAMF_FRACTION_DEFAULT = 0.803
# Under steady full-power load with all eight GPUs of a node busy, the sustained rate ("MSMF")
# is 0.849 (H200) and 0.840 (B200) of the burst rate, because boost clocks are not held at TDP
# (Bekman, compute/accelerator/benchmarks/README.md, "alone vs all-8 concurrent"). A run that
# keeps one GPU of a node busy runs at the burst rate.
SUSTAINED_RATIO = 0.845
# Output tile of the large cuBLAS/CUTLASS bf16 kernels: 256 x 128 (the tile the NVIDIA guide
# above uses in its wave-quantization example), either orientation.
TILE_LONG, TILE_SHORT = 256, 128
# k elements streamed before a tile's main loop runs at full rate: a 4-stage software pipeline
# of 64-wide k slices, the depth of CUTLASS's sm80/sm90 multistage mainloops (fp8 slices are
# 128 wide, the same bytes, so twice the elements).
K_FILL = 256
# A partial last wave is spread over every SM by stream-K decomposition (Osama et al., "Stream-K:
# Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the GPU", PPoPP
# 2023; CUTLASS 3's Hopper kernels and cuBLAS's split-K / stream-K kernels): each SM takes an
# equal share of the MAC-loop iterations, which can span two tiles, so two pipeline fills.
STREAM_K_FILLS = 2
# fp8 tensor cores run at twice the bf16 dense rate on Hopper and Blackwell (H100 datasheet:
# 1,979 vs 989 TFLOPS dense), but the best measured fp8 matmul is a smaller fraction of that
# peak, and not the same fraction on every part of one generation (Bekman, MAMF table, FP8,
# float8_e4m3fn): H100 SXM 70.9% (1,402.6 TFLOPS, where its bf16 reaches 80.3%), H200 SXM
# 73.4%, B200 SXM 76.3%; the median over NVIDIA's parts, 73.9%, for a part the table lacks.
# Azure's cuBLASLt fp8 sweep on ND H100 v5 agrees with H100's own figure, not the median:
# 1,377 TFLOPS (69.6%) at 16384^3 (Azure/AI-benchmarking-guide).
FP8_MAMF_FRACTION = 0.739
FP8_MAMF_FRACTION_BY_GPU = {"H100": 0.709, "H200": 0.734, "B200": 0.763}
# Memory-bound kernels stream at 79-89% of datasheet HBM bandwidth: STREAM copy / triad on
# Azure ND A100 v4 1.61 / 1.70 of 2.04 TB/s, ND H100 v5 2.90 / 2.97 of 3.35, ND H200 v5
# 4.01 / 4.15 of 4.8 (Azure/AI-benchmarking-guide results); 0.85 is their middle.
HBM_FRACTION = 0.85
# GPU-side gap per kernel: back-to-back launches of a 2.9 us kernel took 3.8 us each from a
# stream and 3.4 us each from a CUDA graph (NVIDIA developer blog, A. Gray, "Getting Started
# with CUDA Graphs", 2019).
KERNEL_GAP_S = 0.9e-6
GRAPH_KERNEL_GAP_S = 0.5e-6
# Host time to issue one eager PyTorch operator (Python, dispatcher, cudaLaunchKernel): about
# 20 us from the Python call to the kernel start for an element-wise op (NVIDIA Nsight Systems
# user guide, PyTorch example on V100). Small models in eager mode are bound by it.
EAGER_HOST_S_PER_KERNEL = 20e-6


def sms_of(gpu_name: str) -> int:
    return SMS_BY_ARCH[gpu_arch(gpu_name)]


def mamf_fraction_of(gpu_name: str) -> float:
    return MAMF_FRACTION_BY_ARCH.get(gpu_arch(gpu_name), MAMF_FRACTION_DEFAULT)


def fp8_mamf_fraction_of(gpu_name: str) -> float:
    """The best measured fp8 matmul over the part's fp8 peak (catalogue name's model prefix)."""
    model = gpu_name.upper().split("-")[0]
    return FP8_MAMF_FRACTION_BY_GPU.get(model, FP8_MAMF_FRACTION)


@dataclass(frozen=True, slots=True)
class KernelModel:
    """Rates of one GPU as the kernels of a training step see them.

    ``gemm_fraction`` is the burst matmul rate over the dense peak (MAMF), already times
    ``SUSTAINED_RATIO`` when every GPU of the node is busy; ``gap_s`` is the GPU-side cost of each
    kernel and ``host_s`` the host time to launch one (0 with CUDA graphs).
    """

    peak_flops_s: float
    gemm_fraction: float
    sms: int
    bytes_s: float
    operand_bytes: float = 2.0  # bytes per GEMM input element (2 bf16, 1 fp8)
    gap_s: float = KERNEL_GAP_S
    host_s: float = 0.0

    @property
    def gemm_flops_s(self) -> float:
        return self.peak_flops_s * self.gemm_fraction

    def gemm_s(self, m: float, n: float, k: float, batch: float = 1.0) -> float:
        """One (batched) GEMM C[m,n] = A[m,k] B[k,n]: waves of output tiles, or its bytes at
        HBM speed, whichever is slower (see the module docstring)."""
        return max(
            self._tile_s(m, n, k, batch),
            batch * (self.operand_bytes * (m * k + k * n) + 2.0 * m * n) / self.bytes_s,
        )

    def _tile_s(self, m: float, n: float, k: float, batch: float) -> float:
        sm_flops_s = self.gemm_flops_s / self.sms
        k_fill = K_FILL * 2.0 / self.operand_bytes
        best = math.inf
        for tm, tn in ((TILE_LONG, TILE_SHORT), (TILE_SHORT, TILE_LONG)):
            tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
            waves = math.ceil(tiles / self.sms)
            tile_flops = 2.0 * tm * tn
            best = min(best, (waves * k + k_fill) * tile_flops / sm_flops_s)
            share_k = tiles * k / self.sms
            if tiles % self.sms and share_k >= STREAM_K_FILLS * k_fill:
                # stream-K: every SM streams an equal share of all tiles' k iterations, so a
                # partial last wave leaves no SM idle; a share spans parts of up to two tiles,
                # each begun with a pipeline fill. A share shorter than those fills is not
                # worth splitting (partial sums must still be added at each seam).
                best = min(best, (share_k + STREAM_K_FILLS * k_fill) * tile_flops / sm_flops_s)
        return best

    def gemm_fwd_bwd_s(self, m: float, n: float, k: float) -> tuple[float, float]:
        """Forward GEMM, and backward's data-gradient and weight-gradient GEMMs."""
        return self.gemm_s(m, n, k), self.gemm_s(m, k, n) + self.gemm_s(k, n, m)

    def stream_s(self, nbytes: float) -> float:
        """A memory-bound kernel moving ``nbytes`` (reads plus writes)."""
        return nbytes / self.bytes_s


def kernel_model(
    gpu_name: str,
    bf16_dense_tflops: float,
    mem_bw_tbyte_s: float,
    *,
    node_busy: bool = True,
    fp8: bool = False,
    cuda_graphs: bool = False,
    host_s_per_kernel: float = EAGER_HOST_S_PER_KERNEL,
    mamf_fraction: float | None = None,
    bytes_s: float | None = None,
    gap_s: float | None = None,
) -> KernelModel:
    """The rates of ``gpu_name``; keyword overrides come from a calibration file."""
    fraction = mamf_fraction if mamf_fraction is not None else mamf_fraction_of(gpu_name)
    if fp8:
        # the part's fp8 burst fraction, scaled as a calibrated bf16 fraction is scaled
        fraction = 2.0 * fp8_mamf_fraction_of(gpu_name) * fraction / mamf_fraction_of(gpu_name)
    if node_busy:
        fraction *= SUSTAINED_RATIO
    gap = gap_s if gap_s is not None else (GRAPH_KERNEL_GAP_S if cuda_graphs else KERNEL_GAP_S)
    return KernelModel(
        peak_flops_s=bf16_dense_tflops * 1e12,
        gemm_fraction=fraction,
        sms=sms_of(gpu_name),
        bytes_s=bytes_s if bytes_s is not None else mem_bw_tbyte_s * 1e12 * HBM_FRACTION,
        operand_bytes=1.0 if fp8 else 2.0,
        gap_s=gap,
        host_s=0.0 if cuda_graphs else host_s_per_kernel,
    )


__all__ = [
    "EAGER_HOST_S_PER_KERNEL",
    "HBM_FRACTION",
    "KERNEL_GAP_S",
    "SUSTAINED_RATIO",
    "KernelModel",
    "fp8_mamf_fraction_of",
    "kernel_model",
    "mamf_fraction_of",
    "sms_of",
]
