"""The sandbox each submission runs in: bubblewrap (`bwrap`) plus resource limits.

Why bubblewrap: it builds a new root file system from an explicit list of read-only
binds (the system's libraries, the Python environment, the package) instead of hiding
paths one by one, so anything not listed (the course folder with `source/`, the
gradebook, other submissions, the repository's `assignments/` and `tests/`, the home
folder) is simply absent. It also unshares the network, PIDs, IPC and users in one
call, needs no daemon and installs from every distribution (`apt-get install
bubblewrap`). `unshare` (util-linux) can do the same, but only by running our own
mount commands inside the new namespace, which is more code to get wrong.

The limits: address space (`RLIMIT_AS`), CPU seconds, file size, open files and no core
dumps, set with `setrlimit` on the process that becomes the sandbox; the grader kills
the whole sandbox (its PID namespace) at the wall-clock limit.

What it does not protect against (see assignments/README.md): reading the parts of the
system it binds (the Python environment, the package's source, the locale and font
files); using the full CPU and memory up to the limits; a kernel or bubblewrap
vulnerability; and anything a submission computes within its own process (it could
execute the package's source itself: that is copying, caught by reading, not by the
grader).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

INSTALL = (
    "bubblewrap (bwrap) is needed to grade submissions in a sandbox and is not "
    "installed: apt-get install bubblewrap (dnf/pacman: bubblewrap)"
)
ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "fonts",
    "mime.types",
    "alternatives",
)
MIB = 1 << 20


class SandboxMissing(RuntimeError):
    "bubblewrap is missing or cannot create namespaces here."


def problem() -> str | None:
    "Why no sandbox can be made here (one line), or None when bubblewrap works."
    if not shutil.which("bwrap"):
        return INSTALL
    r = subprocess.run(
        [shutil.which("bwrap"), *_system(), "--unshare-all", "true"],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        why = " ".join(r.stderr.split())[:160]
        return f"bubblewrap cannot create a sandbox here ({why}): user namespaces off?"
    return None


def _system() -> list[str]:
    "Read-only binds of the system's programs and libraries, and of the Python in use."
    args = []
    for top in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / top
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    for name in ETC:
        p = Path("/etc") / name
        if p.exists():
            args += ["--ro-bind", str(p), str(p)]
    exe = Path(sys.executable)
    for p in sorted({sys.prefix, sys.base_prefix, str(exe.resolve().parent.parent)}):
        for q in sorted({Path(p), Path(p).resolve()}):
            if q.exists() and q.parts[1:2] != ("usr",):
                args += ["--ro-bind", str(q), str(q)]
    return args


def package_dir() -> Path:
    "The folder of the `sat_tutorial` package the grader itself imports."
    import sat_tutorial

    return Path(sat_tutorial.__file__).resolve().parent


def command(
    argv: list[str],
    work: Path,
    out: Path,
    grader: Path,
    env: dict | None = None,
) -> list[str]:
    """The bwrap command line that runs `argv` with `work` as its writable /submission
    (and current folder), `out` as writable /out, `grader` (runner.py) read-only at
    /grader/runner.py and the package read-only at /pkg/sat_tutorial; no network."""
    exe = shutil.which("bwrap")
    if not exe:
        raise SandboxMissing(INSTALL)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": "/pkg:/grader",
        "HOME": "/submission",
        "MPLCONFIGDIR": "/tmp",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "NBGRADER_EXECUTION": "autograde",
        **(env or {}),
    }
    args = [exe, "--unshare-all", "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL", "--hostname", "sandbox"]
    # the scratch /tmp first: a checkout or a Python environment under /tmp is then
    # bound on top of it, not hidden by it
    args += ["--size", str(256 * MIB), "--tmpfs", "/tmp"]
    args += _system()
    args += ["--ro-bind", str(package_dir()), "/pkg/sat_tutorial"]
    args += ["--ro-bind", str(grader), "/grader/runner.py"]
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += ["--bind", str(work), "/submission", "--bind", str(out), "/out"]
    args += ["--remount-ro", "/", "--chdir", "/submission", "--clearenv"]
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args + list(argv)


def limiter(memory_mib: int, cpu_seconds: int):
    "A preexec function that sets the sandbox's resource limits before bwrap starts."

    def set_limits():
        def cap(what, value):
            resource.setrlimit(what, (value, value))

        cap(resource.RLIMIT_AS, memory_mib * MIB)
        cap(resource.RLIMIT_CPU, cpu_seconds)
        cap(resource.RLIMIT_FSIZE, 256 * MIB)
        cap(resource.RLIMIT_NOFILE, 256)
        cap(resource.RLIMIT_CORE, 0)

    return set_limits
