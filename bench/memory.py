"""Benchmark: peak memory of forward mode (native, torch.func.jvp, dualgen with its
C++ and its Python kernels) against the plain call and against backprop.

Each (workload, method) runs in a fresh process, forked from a server that has
imported torch and nothing else (multiprocessing's forkserver), float32, one
thread: the inputs (tensors, tangents, parameters) are made first, the method runs
once to warm up, then the peak resident size is reset (/proc/self/clear_refs) and
the method runs again; the figure is that run's peak (VmHWM) above the resident
size just before it, in MiB, with the run's time. Memory freed goes back to the
system at once (glibc's thresholds fixed low), so the peak is what was live.
`--one WORKLOAD METHOD` measures one cell in this process and prints its record.
Workloads: bench/memory_workloads.py; the method: docs/benchmarks.md#memory.

    python bench/memory.py [--workloads chain,mlp-input] [--methods primal,dualgen]
                           [--json PATH] [--repeats N] [--timeout S]
                           [--memory-limit GIB]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import datetime
import gc
import json
import multiprocessing
import multiprocessing.context
import os
import resource
import signal
import statistics
import time
from multiprocessing.connection import Connection
from pathlib import Path

import memory_report
import memory_workloads
import torch
from memory_workloads import DUALGEN_BACKENDS, METHODS, WORKLOADS
from proc_memory import reset_peak, status

# mallopt parameters (glibc malloc.h), and the fixed thresholds: every block of
# 128 KiB or more is its own mapping, returned to the system when freed.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_THRESHOLD = 128 << 10
MiB = 1024.0


def release_freed_memory() -> bool:
    """Fix glibc's thresholds (setting them turns off their moving with the
    workload): freed tensors leave the resident set at once, so the warm-up leaves
    no free pages behind for the measured run to reuse unseen."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD)
            and libc.mallopt(_M_TRIM_THRESHOLD, _THRESHOLD)
        )
    except (OSError, AttributeError, TypeError):
        return False


def limit_address_space(extra_gib: float) -> None:
    """At most `extra_gib` more of address space than mapped now: a run that would
    take the machine's memory fails to allocate ('out of memory') instead."""
    now = status("VmSize") * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (now + int(extra_gib * (1 << 30)), hard))


def _is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    refused = ("not enough memory", "can't allocate memory")
    return isinstance(error, MemoryError) or any(words in text for words in refused)


def _select_kernels(method: str) -> None:
    """dualgen reads DUALGEN_KERNELS when first asked: set before it is imported."""
    os.environ.pop("DUALGEN_KERNELS", None)
    if method in DUALGEN_BACKENDS:
        os.environ["DUALGEN_KERNELS"] = DUALGEN_BACKENDS[method]


def measure_one(workload: str, method: str, memory_limit_gib: float) -> dict:
    """In this (fresh) process: the record of `method` on `workload`."""
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the same inputs in every process: the checks compare
    _select_kernels(method)
    record: dict = {"workload": workload, "method": method}
    record["malloc_fixed"] = release_freed_memory()
    try:
        if method in DUALGEN_BACKENDS:
            import dualgen

            record["backend"] = dualgen.kernel_backend()
        run = memory_workloads.build(workload, method)
        limit_address_space(memory_limit_gib)
        run()  # warm-up: lazy imports, the backprop's cotangent
        gc.collect()
        before = status("VmRSS")
        reset_peak()
        start = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - start
        peak = status("VmHWM")
    except Exception as error:  # noqa: BLE001 - a missing rule, an allocation refused
        status_word = "out of memory" if _is_out_of_memory(error) else "raises"
        return record | {"status": status_word, "reason": _reason(error)}
    return record | {
        "status": "ok",
        "peak_mib": (peak - before) / MiB,
        "seconds": seconds,
        "check": float(result.detach().double().norm()),
    }


def _reason(error: BaseException) -> str:
    first_line = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first_line}"


def _child(send: Connection, workload: str, method: str, memory_limit: float) -> None:
    """A forked child's work: its record through the pipe. Its warnings are the
    record's to tell, not the terminal's."""
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)
    try:
        record = measure_one(workload, method, memory_limit)
    except BaseException as error:  # noqa: BLE001 - sent back, the parent goes on
        record = {"workload": workload, "method": method, "status": "failed"}
        record["reason"] = _reason(error)
    send.send(record)


def fresh_processes() -> multiprocessing.context.ForkServerContext:
    """Processes forked from a server that has imported torch and nothing else (a
    fresh process each, without paying `import torch` each time), one thread."""
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # the server's
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch"])
    return context


def run_fresh(
    processes: multiprocessing.context.ForkServerContext,
    workload: str,
    method: str,
    timeout: float,
    memory_limit: float,
) -> dict:
    """`measure_one` in a fresh process; a timeout or the kernel's OOM killer
    becomes a record saying so."""
    receive, send = processes.Pipe(duplex=False)
    args = (send, workload, method, memory_limit)
    child = processes.Process(target=_child, args=args, daemon=True)
    child.start()
    send.close()
    record = {"workload": workload, "method": method}
    try:
        if not receive.poll(timeout):  # True on a record, and on the child's end
            child.kill()
            return record | {"status": "timeout", "reason": f"over {timeout:.0f} s"}
        return receive.recv()
    except EOFError:  # died without a record
        child.join()
        if child.exitcode == -signal.SIGKILL:
            return record | {"status": "out of memory", "reason": "killed (SIGKILL)"}
        return record | {"status": "failed", "reason": f"exit {child.exitcode}"}
    finally:
        child.join()
        receive.close()


def _names(text: str | None, known, what: str) -> list[str]:
    if text is None:
        return list(known)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}: choose from {', '.join(known)}")
    return names


def combine(runs: list[dict]) -> dict:
    """One cell's record from its processes: the largest peak (a peak is a
    maximum), the median time; the first failure if any run failed."""
    failed = [r for r in runs if r["status"] != "ok"]
    if failed or len(runs) == 1:
        return (failed or runs)[0]
    peaks = [r["peak_mib"] for r in runs]
    return runs[0] | {
        "peak_mib": max(peaks),
        "peaks_mib": peaks,
        "seconds": statistics.median(r["seconds"] for r in runs),
    }


def run_all(args: argparse.Namespace) -> list[dict]:
    workloads = _names(args.workloads, WORKLOADS, "workloads")
    methods = _names(args.methods, METHODS, "methods")
    processes, records = fresh_processes(), []
    for workload in workloads:
        for method in methods:
            if method not in WORKLOADS[workload].methods():
                continue
            runs = [
                run_fresh(processes, workload, method, args.timeout, args.memory_limit)
                for _ in range(args.repeats)
            ]
            record = combine(runs)
            records.append(record)
            print(
                f"  {workload:14} {method:15} {memory_report.cell(record)}", flush=True
            )
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--one",
        nargs=2,
        metavar=("WORKLOAD", "METHOD"),
        help="measure one cell in this process, print its record (JSON)",
    )
    parser.add_argument("--workloads", help=f"comma-separated: {', '.join(WORKLOADS)}")
    parser.add_argument("--methods", help=f"comma-separated: {', '.join(METHODS)}")
    parser.add_argument("--json", type=Path, help="write the records and goals here")
    parser.add_argument(
        "--timeout", type=float, default=120, help="seconds per process (default 120)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="fresh processes per cell: the largest peak, the median time (default 1)",
    )
    parser.add_argument(
        "--memory-limit",
        type=float,
        default=12,
        help="GiB a process may map beyond its inputs (default 12)",
    )
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(*args.one, args.memory_limit)))
        return
    started = datetime.datetime.now()
    print(f"memory benchmark, {started:%Y-%m-%d %H:%M}")
    records = run_all(args)
    goals = memory_report.evaluate(records)
    print()
    print(memory_report.report(records, goals))
    processes = "a fresh process per cell"
    if args.repeats > 1:
        processes = (
            f"{args.repeats} fresh processes per cell (largest peak, median time)"
        )
    print(
        f"\ntorch {torch.__version__}, float32, 1 thread, {processes}, peak resident "
        "memory above the inputs (VmHWM, after a warm-up run), time of the measured run"
    )
    if args.json:
        document = {
            "date": started.isoformat(timespec="seconds"),
            "torch": torch.__version__,
            "records": records,
            "goals": goals,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
