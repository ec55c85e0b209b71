"""Device timing shared by `python -m flyaot bench` and benchmarks/: median kernel time of a call
captured in a CUDA/HIP graph (so host launch cost is excluded), and whether device 0 is the prebuilt target."""
import statistics

from .. import targets


def on_prebuilt_target() -> bool:
    """Whether GPU 0 is the target the prebuilt set is built for."""
    import torch
    arch = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "") if torch.cuda.is_available() else ""
    return arch.split(":")[0] == targets.DEFAULT_TARGET


def graph_median_us(call, rounds: int, launches_per_graph: int = 20) -> float:
    """Median microseconds per call over `rounds` replays of a graph holding `launches_per_graph` calls."""
    import torch
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches_per_graph):
            call()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / launches_per_graph)
    return statistics.median(times)
