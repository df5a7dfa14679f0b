"""The GPU's own ceilings, measured in the same run as the benchmarks (METHOD.md: measure them once
on the device machine and hold the kernels to those, not to the datasheet): device-to-device copy
bandwidth (bytes read plus written), read-only bandwidth (a sum over a buffer far larger than L2),
and a bf16 matrix product's rate, through PyTorch. Prints one JSON line:

    python3 bench/device/ceilings.py
"""

import json

import torch


def timed(op, repeat=10):
    """Median milliseconds of op() over `repeat` runs after 3 warm-ups (CUDA events)."""
    for _ in range(3):
        op()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        op()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    size = 2 << 30  # 2 GiB: far past the 60 MB of L2
    source = torch.randint(-128, 127, (size,), dtype=torch.int8, device="cuda")
    target = torch.empty_like(source)
    copy_ms = timed(lambda: target.copy_(source))
    words = source.view(torch.int32)
    # (a max, not sum(dtype=torch.int64): that converts the 2 GiB to int64 first, and read 745 GB/s
    # where the copy moved 4,225 on the H200, 2026-12-04)
    read_ms = timed(lambda: words.amax())
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    matmul_ms = timed(lambda: a @ b)
    print(
        json.dumps(
            {
                "engine": "pytorch-ceilings",
                "device": torch.cuda.get_device_name(),
                "copyGBps": 2 * size / (copy_ms * 1e-3) / 1e9,
                "readGBps": size / (read_ms * 1e-3) / 1e9,
                "bf16Tflops": 2 * n**3 / (matmul_ms * 1e-3) / 1e12,
            }
        )
    )


if __name__ == "__main__":
    main()
