"""torch_timer.py: step 05's timer for PyTorch's kernels, so that the comparison scripts (sdpa_reference.py,
sdpa_decode.py) time the yardsticks exactly as step 05 times its own kernels (common/gpu.cu, "the timer"):

  one sample = the GPU kept busy ~1 ms by a kernel that only waits (torch.cuda._sleep), then a write of twice the
  L2's size (every method starts from the same cold L2), then the start event, the call, the end event,

all queued by the host while the GPU waits, so PyTorch's dispatch on the host (SDPA's checks, autograd's graph
walk) is never inside a sample. The median of the samples is the time."""
import statistics

import torch

SPIN_MS = 1.0
_state = {}


def _setup():
    if _state:
        return
    # torch.cuda._sleep counts SM clock cycles: calibrate cycles per millisecond once
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    a.record()
    torch.cuda._sleep(20_000_000)
    b.record()
    b.synchronize()
    _state["cycles_per_ms"] = 20_000_000 / a.elapsed_time(b)
    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 64 << 20)
    _state["flush"] = torch.empty(2 * max(l2, 4 << 20), dtype=torch.uint8, device="cuda")


def sample_ms(call, rnd=0):
    """One sample of call() in milliseconds."""
    _setup()
    torch.cuda._sleep(int(SPIN_MS * _state["cycles_per_ms"]))
    _state["flush"].fill_(rnd & 0xFF)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    call()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def median_ms(call, warmup=3, repeat=10):
    """warmup calls, then the median of repeat samples, in milliseconds."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    return statistics.median(sample_ms(call, r) for r in range(repeat))
