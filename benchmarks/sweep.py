"""Run a benchmark's independent model evaluations through an existing executor: a Ray-backed one when
Ray is installed (its futures are Ray's own: `ObjectRef.future()`), else concurrent.futures'
ProcessPoolExecutor. Both are `concurrent.futures.Executor`s, so the caller's code path is the same:
`with executor(jobs) as ex: results = list(ex.map(fn, args))`. `fn` must be a module-level function
(it is pickled to the workers)."""
import concurrent.futures
import os


class RayExecutor(concurrent.futures.Executor):
    """concurrent.futures' interface over Ray tasks (Ray schedules them on its own workers)."""

    def __init__(self):
        import ray
        self._ray = ray
        if not ray.is_initialized():
            ray.init(log_to_driver=False)

    def submit(self, fn, /, *args, **kwargs):
        return self._ray.remote(fn).remote(*args, **kwargs).future()


def executor(jobs: int = 0) -> concurrent.futures.Executor:
    """Ray's when importable, else a process pool of `jobs` workers (0: one per CPU)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return concurrent.futures.ProcessPoolExecutor(max_workers=jobs or os.cpu_count())
    return RayExecutor()
