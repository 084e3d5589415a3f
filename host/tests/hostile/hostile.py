"""A hostile Flow: tries to escape or exhaust its envelope and reports what
it could and could not do. Input: {"attack": NAME, ...parameters}.

Every attack that can return reports plain data; attacks the envelope is
expected to end (memory, CPU) never return on a correct host.
"""

import ctypes
import errno
import os
import signal
import socket
import time

from jiggy.flow import handle

PTRACE_ATTACH = 16
PTRACE_DETACH = 17
FORK_ATTEMPTS = 1000
HOG_CHUNK = 16 * 1024 * 1024
HOG_TOTAL = 1024 * 1024 * 1024


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__


def fork_bomb(_):
    forked = 0
    failure = None
    for _ in range(FORK_ATTEMPTS):
        try:
            pid = os.fork()
        except OSError as e:
            failure = err_name(e)
            break
        if pid == 0:
            # Every child keeps trying to multiply, then lingers.
            try:
                os.fork()
            except OSError:
                pass
            time.sleep(60)
            os._exit(0)
        forked += 1
    return {"forked": forked, "failure": failure}


def memory_hog(ctx):
    total = ctx.input.get("mib", HOG_TOTAL // (1024 * 1024)) * 1024 * 1024
    held = []
    while len(held) * HOG_CHUNK < total:
        held.append(b"x" * HOG_CHUNK)
    return {"heldMiB": len(held) * HOG_CHUNK // (1024 * 1024)}


def cpu_spin(_):
    n = 0
    while True:
        n += 1


def cpu_share(ctx):
    until = time.monotonic() + ctx.input["seconds"]
    while time.monotonic() < until:
        pass
    return {"cpuSeconds": time.process_time()}


def daemon(_):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 1024)
            time.sleep(120)
        os._exit(0)
    os.waitpid(pid, 0)
    return {"daemonized": True}


def network(ctx):
    report = {}
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", ctx.input["port"]))
        report["tcp"] = "connected"
    except OSError as e:
        report["tcp"] = err_name(e)
    finally:
        s.close()
    try:
        socket.getaddrinfo(ctx.input["name"], 443)
        report["dns"] = "resolved"
    except OSError as e:
        report["dns"] = "failed: " + type(e).__name__
    return report


def reads(ctx):
    report = {}
    for path in ctx.input["paths"]:
        try:
            if os.path.isdir(path):
                report[path] = {"ok": True, "text": " ".join(sorted(os.listdir(path)))}
            else:
                with open(path, "rb") as f:
                    report[path] = {"ok": True, "text": f.read(4096).decode("latin-1")}
        except OSError as e:
            report[path] = {"ok": False, "error": err_name(e)}
    return report


def writes(ctx):
    report = {}
    beside_me = os.path.join(os.path.dirname(os.path.abspath(__file__)), "escape")
    for path in ctx.input["paths"] + [beside_me]:
        try:
            with open(path, "w") as f:
                f.write("escaped")
            report[path] = {"ok": True}
        except OSError as e:
            report[path] = {"ok": False, "error": err_name(e)}
    return report


def fill(ctx):
    """Write each of {"files": {PATH: BYTES}} whole, report how it went,
    and remove it again (so one bound's test does not fill the next)."""
    report = {}
    for path, size in ctx.input["files"].items():
        try:
            with open(path, "wb") as f:
                f.write(b"\x07" * size)
            report[path] = {"ok": True}
        except OSError as e:
            report[path] = {"ok": False, "error": err_name(e)}
        try:
            os.remove(path)
        except OSError:
            pass
    return report


def ptrace(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    report = {}
    for pid in ctx.input["pids"]:
        r = libc.ptrace(PTRACE_ATTACH, pid, None, None)
        if r == 0:
            libc.ptrace(PTRACE_DETACH, pid, None, None)
            report[str(pid)] = "attached"
        else:
            report[str(pid)] = errno.errorcode.get(ctypes.get_errno(), "?")
    return report


def fds(_):
    report = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            report[fd] = os.readlink("/proc/self/fd/" + fd)
        except OSError as e:
            report[fd] = err_name(e)
    return report


TERM_MARKER = b"hostile: got SIGTERM\n"


def term_trap(_):
    """Says on stderr that it got SIGTERM, then exits: a polite component."""
    def on_term(_signum, _frame):
        os.write(2, TERM_MARKER)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    os.write(2, b"hostile: waiting\n")
    while True:
        time.sleep(60)


def term_ignore(_):
    """Ignores SIGTERM and lingers: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


def noop(_):
    return {"ok": True}


ATTACKS = {
    "fork-bomb": fork_bomb,
    "memory-hog": memory_hog,
    "cpu-spin": cpu_spin,
    "cpu-share": cpu_share,
    "daemon": daemon,
    "network": network,
    "reads": reads,
    "writes": writes,
    "fill": fill,
    "ptrace": ptrace,
    "fds": fds,
    "term-trap": term_trap,
    "term-ignore": term_ignore,
    "noop": noop,
}


async def run(ctx):
    return {"outcome": "done", "output": ATTACKS[ctx.input["attack"]](ctx)}


handle(run)
