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
dumps, set with `setrlimit` on the process that becomes the sandbox; where the machine
lets the grader make a cgroup (v1: `/sys/fs/cgroup/memory` and `/sys/fs/cgroup/pids`,
as root), the whole sandbox also shares one memory limit and one process limit (every
process it forks counts); the grader kills the whole sandbox (its PID namespace) at the
wall-clock limit. Inside, no user namespace can be made (`--disable-userns`, where the
installed bubblewrap has it), and Python reads no user site (`-s`,
`PYTHONNOUSERSITE=1`) and never puts the submission folder on `sys.path`.

The package it binds is, while a submission is graded, the assignment's stubbed copy
(stubs.py, through `package`): the functions that compute what the parts ask for are
stubs there, so no route from inside (a call, an unwrapped guard, the source read and
executed) reaches them.

What it does not protect against (see assignments/README.md): reading the parts of the
system it binds (the Python environment, the package's stubbed source, the locale and
font files); using the full CPU and memory up to the limits; a kernel or bubblewrap
vulnerability.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import resource
import shutil
import subprocess
import sys
import threading
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
PIDS_MAX = 128  # processes and threads of one whole sandbox (where a cgroup is made)
CGROUP_V1 = Path("/sys/fs/cgroup")


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


@functools.lru_cache(maxsize=None)
def _bwrap_help() -> str:
    exe = shutil.which("bwrap")
    if not exe:
        return ""
    r = subprocess.run([exe, "--help"], capture_output=True, text=True)
    return r.stdout + r.stderr


@functools.lru_cache(maxsize=None)
def userns_flags() -> list[str]:
    """`--unshare-user --disable-userns` where this bubblewrap has them (0.8 and later)
    and they work here: no nested user namespace inside the sandbox; [] otherwise."""
    flags = ["--unshare-user", "--disable-userns"]
    if "--disable-userns" not in _bwrap_help():
        return []
    r = subprocess.run(
        [shutil.which("bwrap"), *_system(), "--unshare-all", *flags, "true"],
        capture_output=True,
    )
    return flags if r.returncode == 0 else []


def python(args: list[str], exe: str = "python") -> list[str]:
    """The sandbox's Python command: `-s`, no user site (with PYTHONNOUSERSITE=1 and
    PYTHONSAFEPATH=1 in its environment: neither the user site nor the current folder,
    the submission, is on sys.path at start, so a usercustomize.py or sitecustomize.py
    there is never imported). Not `-I`: it would drop PYTHONPATH and PYTHONHASHSEED."""
    return [exe, "-s", *args]


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


_PACKAGE: contextvars.ContextVar = contextvars.ContextVar("package", default=None)


@contextlib.contextmanager
def package(folder: Path):
    """Within this block (in this thread), `command` binds `folder` at
    /pkg/sat_tutorial instead of the package itself: course.py grades each submission
    with the stubbed copy of its assignment (stubs.py)."""
    token = _PACKAGE.set(Path(folder))
    try:
        yield
    finally:
        _PACKAGE.reset(token)


def _hidden_copies(pkg: Path) -> list[str]:
    """Empty, read-only folders over any other `sat_tutorial` inside the bound Python
    environments (a non-editable install in site-packages holds the whole package):
    the sandbox sees the package only at /pkg/sat_tutorial, as bound."""
    args = []
    exe = Path(sys.executable)
    seen = set()
    for p in sorted({sys.prefix, sys.base_prefix, str(exe.resolve().parent.parent)}):
        for lib in Path(p).glob("lib*/python*/*-packages/sat_tutorial"):
            if lib.is_dir() and lib.resolve() != pkg.resolve() and lib not in seen:
                seen.add(lib)
                args += ["--tmpfs", str(lib), "--remount-ro", str(lib)]
    return args


def command(
    argv: list[str],
    work: Path,
    out: Path,
    grader: Path,
    env: dict | None = None,
    inputs: Path | None = None,
) -> list[str]:
    """The bwrap command line that runs `argv` with `work` as its writable /submission
    (and current folder), `out` as writable /out, `grader` (runner.py) read-only at
    /grader/runner.py, the package read-only at /pkg/sat_tutorial (the folder of the
    enclosing `package` block, else the package itself) and, when given, the folder
    `inputs` (the probes' calls and their arguments) read-only at /in; no network."""
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
        "PYTHONNOUSERSITE": "1",
        "PYTHONSAFEPATH": "1",
        "NBGRADER_EXECUTION": "autograde",
        **(env or {}),
    }
    args = [exe, "--unshare-all", *userns_flags(), "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL", "--hostname", "sandbox"]
    # the scratch /tmp first: a checkout or a Python environment under /tmp is then
    # bound on top of it, not hidden by it
    args += ["--size", str(256 * MIB), "--tmpfs", "/tmp"]
    args += _system()
    pkg = _PACKAGE.get() or package_dir()
    args += _hidden_copies(pkg)
    args += ["--ro-bind", str(pkg), "/pkg/sat_tutorial"]
    args += ["--ro-bind", str(grader), "/grader/runner.py"]
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += ["--bind", str(work), "/submission", "--bind", str(out), "/out"]
    if inputs is not None:
        args += ["--ro-bind", str(inputs), "/in"]
    args += ["--remount-ro", "/", "--chdir", "/submission", "--clearenv"]
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args + list(argv)


def limiter(memory_mib: int, cpu_seconds: int, cgroup: "Cgroup | None" = None):
    """A preexec function that sets the sandbox's resource limits before bwrap starts,
    and moves it into `cgroup` (when there is one): all it forks stays there."""

    def set_limits():
        if cgroup is not None:
            cgroup.enter(os.getpid())

        def cap(what, value):
            resource.setrlimit(what, (value, value))

        cap(resource.RLIMIT_AS, memory_mib * MIB)
        cap(resource.RLIMIT_CPU, cpu_seconds)
        cap(resource.RLIMIT_FSIZE, 256 * MIB)
        cap(resource.RLIMIT_NOFILE, 256)
        cap(resource.RLIMIT_CORE, 0)

    return set_limits


# ---- a cgroup (v1) for the whole sandbox, where the machine allows one ---------------


def _own_group(controller: str) -> Path:
    "This process's cgroup folder in the v1 hierarchy of `controller`."
    base = CGROUP_V1 / controller
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(",") and (base / path.lstrip("/")).is_dir():
                return base / path.lstrip("/")
    except (OSError, ValueError):
        pass
    return base


class Cgroup:
    """One memory group and one pids group (cgroup v1) for one sandbox run: the memory
    of all its processes together is capped at `memory_mib` (swap included where the
    kernel counts it), their number at `pids`. Made by `Cgroup.make`, which returns
    None where cgroups cannot be made (not root, cgroup v2 only, a container without
    them); removed by `close` once the sandbox is dead."""

    _n = 0
    _lock = threading.Lock()

    def __init__(self, dirs: list[Path]):
        self.dirs = dirs

    @classmethod
    def make(cls, memory_mib: int, pids: int = PIDS_MAX) -> "Cgroup | None":
        with cls._lock:
            cls._n += 1
            name = f"sat-grade-{os.getpid()}-{cls._n}"
        made = []
        try:
            mem = _own_group("memory") / name
            mem.mkdir()
            made.append(mem)
            (mem / "memory.limit_in_bytes").write_text(str(memory_mib * MIB))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                try:  # swap counted too, where the kernel accounts it
                    (mem / "memory.memsw.limit_in_bytes").write_text(
                        str(memory_mib * MIB)
                    )
                except OSError:
                    pass
            pid = _own_group("pids") / name
            pid.mkdir()
            made.append(pid)
            (pid / "pids.max").write_text(str(pids))
        except OSError:
            cls(made).close()
            return None
        return cls(made)

    def enter(self, pid: int) -> None:
        "Move `pid` into every group (from the child, before it becomes the sandbox)."
        for d in self.dirs:
            with open(d / "cgroup.procs", "w") as f:
                f.write(str(pid))

    def close(self) -> None:
        "Kill what is left in the groups and remove them."
        import signal
        import time

        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    left = (d / "cgroup.procs").read_text().split()
                except OSError:
                    left = []
                for p in left:
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy: its last processes are still exiting
                    time.sleep(0.1)
        self.dirs = []


@functools.lru_cache(maxsize=None)
def cgroup_problem() -> str | None:
    """Why the sandbox cannot have a cgroup here (one line), or None when it can; the
    grade command prints it as a note and keeps the per-process limits."""
    if not (CGROUP_V1 / "memory").is_dir() or not (CGROUP_V1 / "pids").is_dir():
        return (
            "note: no cgroup v1 memory and pids hierarchies here: the sandbox's memory "
            "and process limits are per process (setrlimit), not for the whole sandbox"
        )
    g = Cgroup.make(64)
    if g is None:
        return (
            "note: cannot make a cgroup here (needs root and a writable "
            "/sys/fs/cgroup/memory and /sys/fs/cgroup/pids): the sandbox's memory and "
            "process limits are per process (setrlimit), not for the whole sandbox"
        )
    g.close()
    return None
