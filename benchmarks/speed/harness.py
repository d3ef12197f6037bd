"""What any benchmark needs: timing, peak memory, the machine it ran on, markdown and publishing.

The one home of these tools: the speed benchmark's package uses them, and so can the other
scripts in benchmarks/ (`from speed.harness import ...` once benchmarks/ is on sys.path).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before any OpenMP runtime loads

# Light on purpose: the browser benchmarks (load.py, dashboard.py) import this module, and
# numba, NumPy and scikit-learn load only where a benchmark computes (numba in describe_machine).
from cpdecomp.core.versions import REPORTED, library_versions

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


# --- publishing --------------------------------------------------------------------------------


_START = time.perf_counter()


def publish(text: str, out: Path | None) -> None:
    """Print a benchmark's markdown report and, given a path, write it there too."""
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        log(f"wrote {out}")


def log(message: str) -> None:
    print(f"{time.perf_counter() - _START:7.1f}s {message}", file=sys.stderr, flush=True)


# --- timing ------------------------------------------------------------------------------------


def timed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return time.perf_counter() - start, value


def timed_cpu(function: Callable[..., Any], *args: Any,
              **kwargs: Any) -> tuple[float, float, Any]:
    """(wall seconds, process CPU seconds over all threads, value)."""
    cpu = time.process_time()
    wall, value = timed(function, *args, **kwargs)
    return wall, time.process_time() - cpu, value


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile by linear interpolation, as numpy.percentile (statistics.quantiles
    needs two values)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(seconds: Sequence[float]) -> str:
    """Median (p90, max) in milliseconds."""
    return (f"{1000 * statistics.median(seconds):.0f} ms "
            f"(p90 {1000 * percentile(seconds, 90):.0f}, max {1000 * max(seconds):.0f})")


# --- memory ------------------------------------------------------------------------------------


@dataclass
class Memory:
    """Peak resident memory above the baseline while one operation ran."""

    operation: str
    sampled_mib: float
    """VmRSS sampled every 2 ms by a background thread (misses peaks inside GIL-held kernels)."""
    hwm_mib: float | None
    """VmHWM after resetting it through /proc/self/clear_refs (exact); None where refused."""

    @property
    def peak_mib(self) -> float:
        return max(self.sampled_mib, self.hwm_mib or 0.0)


def status_kib(key: str, pid: int | str = "self") -> int:
    """A line of /proc/PID/status (VmRSS, VmHWM, ...) in KiB; this process by default."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS, so a baseline is not inflated by old garbage."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


class PeakMemory:
    """Context manager: peak extra RSS of the block, sampled every `interval` s and via VmHWM."""

    def __init__(self, operation: str, interval: float = 0.002) -> None:
        self.operation = operation
        self.interval = interval
        self.result: Memory | None = None

    def __enter__(self) -> PeakMemory:
        release_free_memory()
        self._hwm = reset_high_water_mark()
        self._baseline = status_kib("VmRSS")
        self._peak = self._baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, status_kib("VmRSS"))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, status_kib("VmRSS"))
        hwm = (status_kib("VmHWM") - self._baseline) * 1024 / MIB if self._hwm else None
        sampled = (self._peak - self._baseline) * 1024 / MIB
        self.result = Memory(self.operation, sampled, hwm)


# --- the machine -------------------------------------------------------------------------------


@dataclass
class Machine:
    cores: int
    cpu: str
    ram_gib: float
    python: str
    versions: dict[str, str]
    omp_wait_policy: str
    numba_layer: str
    numba_threads: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    commit: str = "?"
    core_changed: str = ""
    """Non-empty when core/ changed while the benchmark ran (it then measured the old code)."""
    warmup_s: float = 0.0


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def ram_gib() -> float:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def versions(names: Sequence[str] = (*REPORTED, "numba", "shap", "threadpoolctl")
             ) -> dict[str, str]:
    return library_versions(tuple(names))


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "core"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + (" (core/ has uncommitted changes)" if dirty else "")


def core_fingerprint() -> dict[str, bytes]:
    """A digest of every core source file this process imported."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().is_relative_to(ROOT / "core"):
            with contextlib.suppress(OSError):
                found[str(Path(path).resolve().relative_to(ROOT))] = hashlib.blake2b(
                    Path(path).read_bytes(), digest_size=16).digest()
    return found


def core_change(before: dict[str, bytes]) -> str:
    """Which imported core files were edited while the benchmark ran (empty when none)."""
    after = core_fingerprint()
    changed = sorted(name for name in before if after.get(name) != before[name])
    if not changed:
        return ""
    return (f"{', '.join(changed)} changed on disk while this ran; the figures are those of "
            "the code imported at the start")


def describe_machine() -> Machine:
    import numba

    return Machine(
        cores=len(os.sched_getaffinity(0)), cpu=cpu_model(), ram_gib=ram_gib(),
        python=platform.python_version(), versions=versions(),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", "unset"),
        numba_layer="?", numba_threads=numba.get_num_threads(), load_before=os.getloadavg(),
        commit=git_commit(),
    )


def load_text(load: Sequence[float]) -> str:
    """A load average (1/5/15 min) as 0.1/0.2/0.3."""
    return "/".join(f"{x:.1f}" for x in load)


# --- markdown ----------------------------------------------------------------------------------


def sec(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds < 100 else f"{seconds:,.0f}"


def times(ratio: float) -> str:
    if ratio >= 1e4:
        mantissa, exponent = f"{ratio:.1e}".split("e")
        return f"{mantissa}×10^{int(exponent)}"
    return f"{ratio:,.1f}×" if ratio < 100 else f"{ratio:,.0f}×"


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def header(*names: str) -> list[str]:
    return [row(*names), row(*("---" for _ in names))]


def table(rows: Sequence[dict[str, str]]) -> list[str]:
    """Markdown lines of a table whose columns are the first row's keys."""
    columns = list(rows[0])
    return [*header(*columns), *(row(*(r[c] for c in columns)) for r in rows)]
