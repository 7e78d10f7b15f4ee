"""Built-in catalogue of GPUs and switches, each figure with the public source it comes from.

A blueprint refers to these by name; it may also declare its own under ``gpus:`` and
``switches:`` (same fields), which take precedence. Prices are not in the catalogue: they belong
to the blueprint, because they are quotes, not datasheet facts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from railyard.blueprint.units import GbitPerS, Gbyte, TbytePerS, Watt


class GpuSpec(BaseModel):
    """One GPU model as its datasheet describes it (dense figures, no sparsity)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bf16_dense_tflops: float = Field(gt=0, description="dense BF16 tensor TFLOP/s")
    mem_gbyte: Gbyte = Field(gt=0)
    mem_bw_tbyte_s: TbytePerS = Field(gt=0)
    nvlink_gbyte_s_per_dir: float = Field(ge=0, description="NVLink GB/s each direction; 0: none")
    tdp_w: Watt = Field(gt=0)
    source: str = ""


class SwitchSpec(BaseModel):
    """One switch model: radix, port speed, size and typical power."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ports: int = Field(gt=0, description="logical ports at port_speed_gbit_s")
    port_speed_gbit_s: GbitPerS = Field(gt=0)
    power_w: Watt = Field(ge=0, description="typical power without optics")
    rack_units: int = Field(default=1, ge=1)
    transport: str = Field(default="any", pattern="^(infiniband|ethernet|any)$")
    source: str = ""


_NV_H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet (SXM5: BF16 1,979 TFLOPS with sparsity, "
    "80 GB, 3.35 TB/s, NVLink 900 GB/s bidirectional, up to 700 W), "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
)

GPUS: dict[str, GpuSpec] = {
    "H100-SXM-80GB": GpuSpec(
        bf16_dense_tflops=989.5,
        mem_gbyte=80,
        mem_bw_tbyte_s=3.35,
        nvlink_gbyte_s_per_dir=450,
        tdp_w=700,
        source=_NV_H100,
    ),
    "H200-SXM-141GB": GpuSpec(
        bf16_dense_tflops=989.5,
        mem_gbyte=141,
        mem_bw_tbyte_s=4.8,
        nvlink_gbyte_s_per_dir=450,
        tdp_w=700,
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet (SXM: BF16 1,979 TFLOPS with sparsity, "
            "141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s, up to 700 W), "
            "https://www.nvidia.com/en-us/data-center/h200/"
        ),
    ),
    "A100-SXM-80GB": GpuSpec(
        bf16_dense_tflops=312,
        mem_gbyte=80,
        mem_bw_tbyte_s=2.039,
        nvlink_gbyte_s_per_dir=300,
        tdp_w=400,
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB: BF16 312 TFLOPS dense, "
            "2,039 GB/s, NVLink 600 GB/s, 400 W), "
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
        ),
    ),
    "B200-SXM-180GB": GpuSpec(
        bf16_dense_tflops=2250,
        mem_gbyte=180,
        mem_bw_tbyte_s=8.0,
        nvlink_gbyte_s_per_dir=900,
        tdp_w=1000,
        source=(
            "NVIDIA HGX B200 specifications (8 GPUs: FP16/BF16 36 PFLOPS with sparsity, "
            "1.4 TB HBM3e, NVLink 1.8 TB/s per GPU) and DGX B200 datasheet (1,440 GB, 64 TB/s "
            "for 8 GPUs), https://www.nvidia.com/en-us/data-center/hgx/; TDP 1,000 W per GPU "
            "per the HGX B200 platform figures"
        ),
    ),
    "L40S-48GB": GpuSpec(
        bf16_dense_tflops=362.05,
        mem_gbyte=48,
        mem_bw_tbyte_s=0.864,
        nvlink_gbyte_s_per_dir=0,
        tdp_w=350,
        source=(
            "NVIDIA L40S datasheet (BF16 362.05 TFLOPS dense / 733 with sparsity, 48 GB GDDR6, "
            "864 GB/s, 350 W, no NVLink), https://www.nvidia.com/en-us/data-center/l40s/"
        ),
    ),
    "RTX-6000-Ada-48GB": GpuSpec(
        bf16_dense_tflops=364.2,
        mem_gbyte=48,
        mem_bw_tbyte_s=0.96,
        nvlink_gbyte_s_per_dir=0,
        tdp_w=300,
        source=(
            "NVIDIA Ada Lovelace architecture whitepaper, RTX 6000 Ada column (peak BF16 tensor "
            "364.2 TFLOPS dense with FP32 accumulate), and RTX 6000 Ada datasheet (48 GB GDDR6, "
            "960 GB/s, 300 W, no NVLink), https://www.nvidia.com/en-us/design-visualization/"
            "rtx-6000/"
        ),
    ),
}

SWITCHES: dict[str, SwitchSpec] = {
    "QM9700": SwitchSpec(
        ports=64,
        port_speed_gbit_s=400,
        power_w=747,
        rack_units=1,
        transport="infiniband",
        source=(
            "NVIDIA QM9700/QM9790 1U NDR 400Gb/s InfiniBand Switch Systems User Manual "
            "(32 OSFP cages, 2 logical 400 Gb/s ports each), https://docs.nvidia.com/networking/"
            "display/QM97X0PUB; typical power approx., passive cables"
        ),
    ),
    "QM8700": SwitchSpec(
        ports=40,
        port_speed_gbit_s=200,
        power_w=253,
        rack_units=1,
        transport="infiniband",
        source=(
            "NVIDIA QM87xx 1U HDR 200Gb/s InfiniBand Switch Systems User Manual (40 x HDR "
            "200 Gb/s QSFP56), https://docs.nvidia.com/networking/display/QM87XX; typical power "
            "approx., passive cables; the switch of DGX A100 SuperPODs"
        ),
    ),
    "SN4700": SwitchSpec(
        ports=32,
        port_speed_gbit_s=400,
        power_w=500,
        rack_units=1,
        transport="ethernet",
        source=(
            "NVIDIA Spectrum-3 SN4000 1U and 2U Switch Systems Hardware User Manual (SN4700: "
            "32 x 400GbE QSFP-DD, 12.8 Tb/s, 1U); typical power approx., passive cables; "
            "seed article 003 (LINE Yahoo) names it for its 2,048-GPU fabric"
        ),
    ),
    "SN5600": SwitchSpec(
        ports=64,
        port_speed_gbit_s=800,
        power_w=1100,
        rack_units=2,
        transport="ethernet",
        source=(
            "NVIDIA Spectrum-4 SN5000 2U Switch Systems Hardware User Manual (SN5600: "
            "64 x 800GbE OSFP, 51.2 Tb/s, 2U); typical power approx., passive cables"
        ),
    ),
    "SN5600-400G": SwitchSpec(
        ports=128,
        port_speed_gbit_s=400,
        power_w=1100,
        rack_units=2,
        transport="ethernet",
        source="SN5600 (above) with its 64 x 800G ports split 2 x 400G each (same manual)",
    ),
    "SN3420": SwitchSpec(
        ports=60,
        port_speed_gbit_s=25,
        power_w=150,
        rack_units=1,
        transport="ethernet",
        source=(
            "NVIDIA Spectrum-2 SN3000 Switch Systems Hardware User Manual (SN3420: 48 x 25GbE "
            "+ 12 x 100GbE, 1U); counted here as 60 front-end ports; typical power approx."
        ),
    ),
}
