"""A fresh environment for every run in a warm sandbox (stdlib only; runs INSIDE the sandbox, beside runner.py).

A run is one program on one test. The harness stays warm across runs, but each run gets an IPC namespace of
its own, a network namespace (loopback up, no other interface) with no socket in it, and a new tmpfs as its
working dir and /dev/shm, so no socket (a port in TIME_WAIT), file, System V IPC object or message queue of
one run reaches the next.

The harness makes them for the run, not the run's child for itself, so that their cost is off the run's
path: it moves itself into a new IPC namespace right after forking a run (the running child keeps the one it
was forked in), and remounts the tmpfs directories once that run's processes are gone, while the host
judges its output. The next child inherits all of it and drops every capability before the program starts.
The kernel frees a run's namespaces when its last process is gone (init kills them all after each test).

A network namespace is the dearest of these to make (the kernel registers a loopback device and its sysctl
tables, and tears them down again later), and a run seldom opens a socket. So the harness shares the run's
network namespace and, once the run's processes are gone, keeps it for the next run only when it holds no
socket at all: a socket a run leaves behind outlives its processes only in the kernel (a TCP connection
closing or in TIME_WAIT, a unix socket kept by a descriptor in flight), which counts every socket of the
namespace (network_is_empty). The program has no capability to change the namespace itself (interfaces,
addresses, routes, sysctls). Any socket counted, or counts it cannot read, and the next run gets a new one.

The harness keeps CAP_SYS_ADMIN and CAP_NET_ADMIN, inside the sandbox's user namespace, for this alone.
"""

import ctypes
import os
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MNT_DETACH = 0x2, 0x4, 0x4000, 0x40000, 0x2
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
EXIT_NO_FRESH_RUN = 70


def check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


class FreshRuns:
    """The namespaces and tmpfs directories of the next run, made ahead of it."""

    def __init__(self, workdir: str, tmpfs_bytes: int) -> None:
        # bwrap's mount namespace belongs to its outer user namespace, where we hold no capability.
        check(LIBC.unshare(CLONE_NEWNS), "unshare the mount namespace")
        check(LIBC.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make the mounts private")
        self.paths = [workdir.encode(), b"/dev/shm"]
        self.options = f"size={tmpfs_bytes},mode=0755".encode()
        self.mounted: set[bytes] = set()
        self.ipc_ready = self.network_ready = self.mounts_ready = False
        self.error = ""

    def renew_namespaces(self) -> None:
        """Any time after the last run was forked: it keeps the IPC namespace it was forked in."""
        self.ipc_ready = False
        try:
            check(LIBC.unshare(CLONE_NEWIPC), "unshare the IPC namespace")
            self.ipc_ready = True
        except OSError as error:
            self.error = str(error)

    def renew_after_run(self) -> None:
        """Only once the last run's processes are gone: the harness shares its mount namespace with them, and
        its network namespace, kept for the next run only when they left no socket in it."""
        if self.network_ready and not network_is_empty():
            self.network_ready = False
        self.renew_mounts()

    def leave_network(self) -> None:
        """The next run gets a new network namespace: the harness made a socket of its own in this one (the
        judge's), or a process of the last run may still be alive."""
        self.network_ready = False

    def renew_network(self) -> None:
        self.network_ready = False
        try:
            check(LIBC.unshare(CLONE_NEWNET), "unshare the network namespace")
            loopback_up()
            self.network_ready = True
        except OSError as error:
            self.error = str(error)

    def renew_mounts(self) -> None:
        self.mounts_ready = False
        try:
            for path in self.paths:
                if path in self.mounted:
                    check(LIBC.umount2(path, MNT_DETACH), f"unmount the last run's {path.decode()}")
                    self.mounted.discard(path)
                check(LIBC.mount(b"tmpfs", path, b"tmpfs", MS_NOSUID | MS_NODEV, self.options), "mount tmpfs")
                self.mounted.add(path)
            self.mounts_ready = True
        except OSError as error:
            self.error = str(error)

    def take(self) -> None:
        """Hand the fresh environment to the run about to be forked. Without one the harness exits (the
        host replaces the sandbox) rather than run a program where another one ran."""
        if not self.ipc_ready:
            self.renew_namespaces()
        if not self.network_ready:
            self.renew_network()
        if not self.mounts_ready:
            self.renew_mounts()
        if not (self.ipc_ready and self.network_ready and self.mounts_ready):
            sys.stderr.write(f"sandbox: no fresh environment for the next run: {self.error}\n")
            sys.exit(EXIT_NO_FRESH_RUN)
        self.ipc_ready = self.mounts_ready = False  # the network namespace stays ready until a socket shows


def network_is_empty() -> bool:
    """No socket in the harness's network namespace: /proc/net/sockstat counts, per namespace, the sockets of
    every family (`sockets: used`, unix and netlink included) and the TCP connections that outlive theirs in
    TIME_WAIT (`tw`). Where a kernel counts either for the whole machine, they are not 0 and every run gets
    a new namespace, as it would without this check. (Listing the sockets, /proc/net/tcp, walks the whole
    machine's connection table instead: far dearer than a new namespace.)"""
    try:
        fd = os.open("/proc/self/net/sockstat", os.O_RDONLY)
    except OSError:
        return False
    try:
        lines = os.read(fd, 4096).decode().splitlines()
    except OSError:
        return False
    finally:
        os.close(fd)
    # "TCP: inuse 0 orphan 0 tw 0 ..." -> {"TCP": {"inuse": "0", "orphan": "0", "tw": "0", ...}}
    counts = {}
    for line in lines:
        protocol, _, fields = line.partition(":")
        words = fields.split()
        counts[protocol] = dict(zip(words[::2], words[1::2], strict=False))
    return counts.get("sockets", {}).get("used") == "0" and counts.get("TCP", {}).get("tw") == "0"


def loopback_up() -> None:
    """A new network namespace has one interface, lo, and it is down."""
    fd = LIBC.socket(2, 2, 0)  # AF_INET, SOCK_DGRAM: any socket takes interface ioctls
    if fd < 0:
        check(-1, "socket")
    try:
        request = ctypes.create_string_buffer(b"lo", 40)  # struct ifreq: char name[16], then short flags
        check(LIBC.ioctl(fd, SIOCGIFFLAGS, request), "read the flags of lo")
        flags = int.from_bytes(request.raw[16:18], sys.byteorder) | IFF_UP
        request[16:18] = flags.to_bytes(2, sys.byteorder)
        check(LIBC.ioctl(fd, SIOCSIFFLAGS, request), "bring lo up")
    finally:
        os.close(fd)


# Built once in the harness: making ctypes array types in every run's child costs a good part of its start.
_CAP_HEADER = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
_NO_CAPABILITIES = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; capabilities 0-31, 32-63
_capset, _prctl = LIBC.capset, LIBC.prctl  # looked up here once, not in every child


def drop_capabilities() -> None:
    """In the run's child, before the program: no_new_privs (set by bwrap) keeps an exec from regaining any."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    check(_capset(_CAP_HEADER, _NO_CAPABILITIES), "drop capabilities")
