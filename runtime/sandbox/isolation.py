"""The kernel layers a sandbox worker puts on itself, with ctypes only (no compiled helper, no extra
dependency): a seccomp BPF filter, a Landlock ruleset, rlimits, dropped capabilities, a private mount
namespace per worker (as root), and the network namespace the zygote enters. Every layer is probed, never
assumed: on a kernel, architecture or account where one is missing, its function says why, and the pool
decides whether that is acceptable; the worker checks each one on itself once it is on.

Only x86_64 and aarch64 have syscall tables here; on any other architecture seccomp is unavailable
(a filter built from the wrong table would allow what it means to deny).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import stat
import struct
import sys

# --- syscall numbers ------------------------------------------------------------------------------------
# From the kernel's uapi headers (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h).
# tests/runtime/test_sandbox.py checks them against the headers when those are installed.
X86_64 = {
    "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288,
    "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "kill": 62, "tkill": 200, "tgkill": 234,
    "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424, "pidfd_open": 434,
    "pidfd_getfd": 438, "bpf": 321, "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "userfaultfd": 323, "swapon": 167, "swapoff": 168, "acct": 163,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "sethostname": 170,
    "setdomainname": 171, "iopl": 172, "ioperm": 173, "quotactl": 179, "quotactl_fd": 443, "syslog": 103,
    "vhangup": 153, "kcmp": 312, "lookup_dcookie": 212, "fanotify_init": 300, "move_mount": 429,
    "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "process_madvise": 440, "process_mrelease": 448, "migrate_pages": 256, "move_pages": 279, "mknod": 133,
    "mknodat": 259, "personality": 135, "uselib": 134, "nfsservctl": 180, "memfd_secret": 447,
    "modify_ldt": 154, "seccomp": 317, "landlock_create_ruleset": 444, "landlock_add_rule": 445,
    "landlock_restrict_self": 446, "capset": 126, "prctl": 157, "timer_create": 222, "mq_notify": 244, "fcntl": 72,
    "memfd_create": 319, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
    "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240,
    "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_getsetattr": 245,
    "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254, "fanotify_mark": 301, "setxattr": 188,
    "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
}
AARCH64 = {  # the generic table: no fork/vfork/mknod (only clone/mknodat), no x86 port I/O calls
    "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201, "accept": 202, "accept4": 242,
    "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
    "rt_tgsigqueueinfo": 240, "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438, "bpf": 280,
    "perf_event_open": 241, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "keyctl": 219, "add_key": 217, "request_key": 218, "mount": 40, "umount2": 39, "pivot_root": 41,
    "chroot": 51, "unshare": 97, "setns": 268, "init_module": 105, "finit_module": 273, "delete_module": 106,
    "kexec_load": 104, "kexec_file_load": 294, "reboot": 142, "open_by_handle_at": 265,
    "name_to_handle_at": 264, "userfaultfd": 282, "swapon": 224, "swapoff": 225, "acct": 89,
    "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "sethostname": 161,
    "setdomainname": 162, "quotactl": 60, "quotactl_fd": 443, "syslog": 116, "vhangup": 58, "kcmp": 272,
    "lookup_dcookie": 18, "fanotify_init": 262, "move_mount": 429, "open_tree": 428, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "process_madvise": 440,
    "process_mrelease": 448, "migrate_pages": 238, "move_pages": 239, "mknodat": 33, "personality": 92,
    "nfsservctl": 42, "memfd_secret": 447, "seccomp": 277, "landlock_create_ruleset": 444,
    "landlock_add_rule": 445, "landlock_restrict_self": 446, "capset": 91, "prctl": 167, "timer_create": 107,
    "mq_notify": 184, "fcntl": 25, "memfd_create": 279, "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197,
    "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188,
    "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183,
    "mq_getsetattr": 185, "inotify_init1": 26, "inotify_add_watch": 27, "fanotify_mark": 263, "setxattr": 5,
    "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16,
}
# Calls newer than the kernel headers installed here (so not in the tables the test compares with them).
# Since Linux 5.1 new calls have one number on every architecture: listmount/statmount (6.8),
# setxattrat/removexattrat (6.13), file_setattr (6.17).
RECENT = {"statmount": 457, "listmount": 458, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469}
# audit arch tokens (linux/audit.h): the filter kills a process whose syscall comes in under another ABI
ARCHES = {"x86_64": (0xC000003E, X86_64), "aarch64": (0xC00000B7, AARCH64)}
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: same arch token, numbers offset by this bit


def machine() -> str:
    """The CPU architecture under its kernel name (x86_64, aarch64, ...)."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def syscall_table() -> dict[str, int] | None:
    entry = ARCHES.get(machine())
    return {**entry[1], **RECENT} if entry else None


# --- libc -----------------------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
if _libc is not None:
    _libc.syscall.restype = ctypes.c_long

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_KEEPCAPS = 8
PR_GET_SECCOMP = 21
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _syscall(name: str, *args) -> int:
    table = syscall_table()
    if _libc is None or table is None or name not in table:
        raise OSError(errno.ENOSYS, f"{name}: no syscall number for {machine()}")
    return _check(_libc.syscall(ctypes.c_long(table[name]), *args), name)


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    if _libc is None:
        raise OSError(errno.ENOSYS, "prctl: not Linux")
    return _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                              ctypes.c_ulong(arg4), ctypes.c_ulong(arg5)), f"prctl({option})")


def die_with_parent(expected_parent: int) -> None:
    """SIGKILL this process when the thread that forked it ends; exit now if that already happened."""
    prctl(PR_SET_PDEATHSIG, 9)
    if os.getppid() != expected_parent:
        os._exit(1)


# --- seccomp --------------------------------------------------------------------------------------------
# Classic BPF over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];} (little endian on both
# supported arches: the low 32 bits of args[i] are at 16 + 8 i).
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
CLONE_THREAD = 0x00010000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: no namespaces, even for threads
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# Denied outright (EPERM unless stated): new sockets (the worker needs none: its channel to the parent is
# inherited), new processes and programs, debugging and reading other processes, signals by other routes
# than kill/tgkill, and the kernel interfaces that no image code needs but that widen the attack surface.
DENY = {
    **dict.fromkeys(("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4"), errno.EPERM),
    **dict.fromkeys(("fork", "vfork", "execve", "execveat"), errno.EPERM),
    "clone3": errno.ENOSYS,  # glibc then falls back to clone(), which the filter can inspect: threads still work
    **dict.fromkeys(("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
                     "pidfd_send_signal", "tkill", "process_madvise", "process_mrelease", "migrate_pages",
                     "move_pages"), errno.EPERM),
    **dict.fromkeys(("bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
                     "personality", "modify_ldt", "iopl", "ioperm", "uselib", "syslog", "vhangup", "acct",
                     "lookup_dcookie", "fanotify_init", "memfd_secret", "nfsservctl"), errno.EPERM),
    **dict.fromkeys(("io_uring_setup", "io_uring_enter", "io_uring_register"), errno.ENOSYS),
    **dict.fromkeys(("mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "move_mount", "open_tree",
                     "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_by_handle_at",
                     "name_to_handle_at", "quotactl", "quotactl_fd", "swapon", "swapoff", "mknod", "mknodat"),
                    errno.EPERM),
    # POSIX timers and message-queue notifications can signal the worker (SIGCONT!) while the parent
    # holds it stopped between cells; Python's own timeout uses setitimer, which sends only SIGALRM.
    **dict.fromkeys(("timer_create", "mq_notify"), errno.EPERM),
    # Memory outside the address-space limit: a memfd is written with write(), not mapped, so RLIMIT_AS never
    # sees it; SysV segments, queues and semaphores and POSIX message queues even outlive the worker, and
    # every session shares them (a channel between sessions). /dev/shm is outside the Landlock rules.
    **dict.fromkeys(("memfd_create", "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl",
                     "semtimedop", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
                     "mq_timedreceive", "mq_getsetattr"), errno.EPERM),
    **dict.fromkeys(("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
                     "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
                     "setdomainname"), errno.EPERM),
    # Other sessions' activity: inotify/fanotify watch files the code may not read (a watch needs only
    # search rights on the path, which Landlock does not govern), and list/statmount name every mount.
    **dict.fromkeys(("inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_mark", "listmount",
                     "statmount"), errno.EPERM),
    # Extended attributes are held outside the disk quota and the memory limit (on a tmpfs, unreclaimable
    # kernel memory); reading them stays allowed. file_setattr changes inode flags and project ids.
    **dict.fromkeys(("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
                     "setxattrat", "removexattrat", "file_setattr"), errno.EPERM),
}
# Allowed only when the first argument is the worker itself: kill(pid | 0 | -pid) (after setsid the worker
# is alone in its process group), tgkill / rt_(tg)sigqueueinfo(pid, ...). So signals reach no other process.
SELF_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# Denied argument values: prctl options that would let the worker outlive the zygote (PDEATHSIG), adopt
# orphans or become dumpable; fcntl(F_SETSIG), which picks the signal of I/O notifications (SIGCONT), and
# fcntl(F_SETPIPE_SZ), which grows a pipe's kernel buffer from 64 KiB to 1 MiB (memory outside RLIMIT_AS).
DENY_ARG = (("prctl", 16, (1, 4, 36)), ("fcntl", 24, (10, 1031)))  # (syscall, offset of the argument, values)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def seccomp_program(arch: str, pid: int) -> bytes:
    """The worker's filter as raw sock_filter instructions. Default allow; see DENY and SELF_ONLY."""
    if arch not in ARCHES:
        raise OSError(errno.ENOSYS, f"seccomp: no syscall table for {arch} (only {', '.join(ARCHES)})")
    audit_arch, table = ARCHES[arch]
    table = {**table, **RECENT}
    arg0 = 16  # offset of args[0], low 32 bits
    eperm = RET_ERRNO | errno.EPERM
    prog = [
        _insn(BPF_LD_W_ABS, 0, 0, 4),                  # A = arch
        _insn(BPF_JEQ_K, 1, 0, audit_arch),
        _insn(BPF_RET_K, 0, 0, RET_KILL_PROCESS),      # another ABI (e.g. 32-bit int 0x80): kill
        _insn(BPF_LD_W_ABS, 0, 0, 0),                  # A = nr
    ]
    if arch == "x86_64":
        prog += [_insn(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT), _insn(BPF_RET_K, 0, 0, RET_KILL_PROCESS)]
    for name, err in DENY.items():
        if name in table:
            prog += [_insn(BPF_JEQ_K, 0, 1, table[name]), _insn(BPF_RET_K, 0, 0, RET_ERRNO | err)]
    prog += [  # clone: threads only (CLONE_THREAD set, no namespace flags)
        _insn(BPF_JEQ_K, 0, 5, table["clone"]),
        _insn(BPF_LD_W_ABS, 0, 0, arg0),
        _insn(BPF_JSET_K, 2, 0, CLONE_NAMESPACES),
        _insn(BPF_JSET_K, 0, 1, CLONE_THREAD),
        _insn(BPF_RET_K, 0, 0, RET_ALLOW),
        _insn(BPF_RET_K, 0, 0, eperm),
    ]
    prog += [  # kill(pid | 0 | -pid)
        _insn(BPF_JEQ_K, 0, 6, table["kill"]),
        _insn(BPF_LD_W_ABS, 0, 0, arg0),
        _insn(BPF_JEQ_K, 2, 0, pid),
        _insn(BPF_JEQ_K, 1, 0, -pid),
        _insn(BPF_JEQ_K, 0, 1, 0),
        _insn(BPF_RET_K, 0, 0, RET_ALLOW),
        _insn(BPF_RET_K, 0, 0, eperm),
    ]
    for name, offset, values in DENY_ARG:
        prog += [_insn(BPF_JEQ_K, 0, len(values) + 3, table[name]), _insn(BPF_LD_W_ABS, 0, 0, offset)]
        prog += [_insn(BPF_JEQ_K, len(values) - k, 0, value) for k, value in enumerate(values)]
        prog += [_insn(BPF_RET_K, 0, 0, RET_ALLOW), _insn(BPF_RET_K, 0, 0, eperm)]
    for name in SELF_ONLY[1:]:
        prog += [
            _insn(BPF_JEQ_K, 0, 4, table[name]),
            _insn(BPF_LD_W_ABS, 0, 0, arg0),
            _insn(BPF_JEQ_K, 0, 1, pid),
            _insn(BPF_RET_K, 0, 0, RET_ALLOW),
            _insn(BPF_RET_K, 0, 0, eperm),
        ]
    prog.append(_insn(BPF_RET_K, 0, 0, RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_status() -> tuple[bool, str]:
    """Whether this kernel can take a seccomp filter here (without installing one)."""
    if not sys.platform.startswith("linux"):
        return False, f"not Linux ({sys.platform})"
    if machine() not in ARCHES:
        return False, f"no syscall table for {machine()} (supported: {', '.join(ARCHES)})"
    try:
        prctl(PR_GET_SECCOMP)
    except OSError as err:
        return False, f"kernel without seccomp (prctl(PR_GET_SECCOMP): {err.strerror})"
    return True, f"{machine()} filter"


def install_seccomp(pid: int) -> str:
    """Install the worker's filter on every thread (TSYNC). PR_SET_NO_NEW_PRIVS must be set first."""
    program = seccomp_program(machine(), pid)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _syscall("seccomp", ctypes.c_ulong(SECCOMP_SET_MODE_FILTER), ctypes.c_ulong(SECCOMP_FILTER_FLAG_TSYNC),
             ctypes.byref(fprog))
    denied = sum(1 for name in DENY if name in syscall_table())
    return (f"{machine()} filter, {len(program) // 8} instructions, TSYNC: {denied} syscalls denied (sockets, "
            "fork/exec, ptrace, mount, bpf, io_uring, memfd, SysV IPC, inotify, xattr writes, ...), clone only for "
            "threads, signals only to itself; checked in the worker: socket() of every family and each inotify and "
            "xattr write call refused")


# --- Landlock -------------------------------------------------------------------------------------------
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_REMOVE_DIR, LL_REMOVE_FILE, LL_MAKE_CHAR, LL_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
LL_MAKE_REG, LL_MAKE_SOCK, LL_MAKE_FIFO, LL_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
LL_MAKE_SYM, LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
LL_SCOPE_ABSTRACT_UNIX_SOCKET, LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
LL_RULE_PATH_BENEATH = 1
LL_CREATE_RULESET_VERSION = 1
# the only rights a rule on a single file (not a directory) may carry
LL_FILE_RIGHTS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV

READ = LL_READ_FILE | LL_READ_DIR
READ_EXEC = READ | LL_EXECUTE
# The work dir gets everything but device nodes, sockets and FIFOs (and exec, which seccomp denies anyway):
# as root, a block device node made there would open the raw disk.
READ_WRITE = (READ | LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_DIR | LL_MAKE_REG | LL_MAKE_SYM
              | LL_REFER | LL_TRUNCATE)


def handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: bits 0-12
    if abi >= 2:
        rights |= LL_REFER
    if abi >= 3:
        rights |= LL_TRUNCATE
    if abi >= 5:
        rights |= LL_IOCTL_DEV
    return rights


def landlock_abi() -> tuple[int, str]:
    """(ABI version, '') or (0, why Landlock is unavailable)."""
    if not sys.platform.startswith("linux"):
        return 0, f"not Linux ({sys.platform})"
    try:
        return _syscall("landlock_create_ruleset", None, ctypes.c_size_t(0),
                        ctypes.c_uint32(LL_CREATE_RULESET_VERSION)), ""
    except OSError as err:
        if err.errno == errno.ENOSYS:
            return 0, "kernel without Landlock (needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)"
        if err.errno == errno.EOPNOTSUPP:
            return 0, "Landlock is built in but disabled (add 'landlock' to the kernel's lsm= boot parameter)"
        return 0, f"Landlock probe failed: {err}"


def apply_landlock(abi: int, rules: list[tuple[str, int]]) -> dict:
    """Restrict this process (and its future threads) to `rules` [(path, rights)]: everything the ABI can
    handle and no rule allows is denied; TCP bind/connect (ABI >= 4) and signals / abstract unix sockets
    outside this process (ABI >= 6) too. Missing paths are skipped. PR_SET_NO_NEW_PRIVS must be set."""
    fs = handled_fs(abi)
    net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP if abi >= 4 else 0
    scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL if abi >= 6 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = ctypes.create_string_buffer(struct.pack("<QQQ", fs, net, scoped)[:size], size)
    ruleset = _syscall("landlock_create_ruleset", attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    added = []
    try:
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                allowed = rights & fs
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= LL_FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("<Qi", allowed, fd), 12)
                _syscall("landlock_add_rule", ctypes.c_int(ruleset), ctypes.c_int(LL_RULE_PATH_BENEATH), rule,
                         ctypes.c_uint32(0))
                added.append(path)
            finally:
                os.close(fd)
        _syscall("landlock_restrict_self", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return {"abi": abi, "paths": added, "net": bool(net), "scoped": bool(scoped)}


SYSTEM_READ_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
SYSTEM_READ_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/dev/urandom", "/dev/random", "/dev/zero")


_python_paths: tuple[list[str], list[str]] | None = None


def python_read_paths() -> tuple[list[str], list[str]]:
    """What the worker's Python needs to read: ([directories], [single files]). Computed once (the
    zygote calls it after preloading, so forked workers inherit the answer).

    The installation (prefixes, stdlib, site-packages: every sys.path entry inside a prefix or named
    site-/dist-packages) is readable whole. A sys.path entry outside those is a source checkout (this
    repo is an editable install): never the whole of it, since session dirs or run outputs may live
    there; only the directories of modules already imported from it (the preloaded `tools` package,
    this sandbox's own code), and a package's __init__.py as a single file."""
    global _python_paths
    if _python_paths is not None:
        return _python_paths
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    dirs, files, checkouts = set(prefixes), set(), []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        real = os.path.realpath(entry)
        if (any(real == p or real.startswith(p + os.sep) for p in prefixes)
                or os.path.basename(real) in ("site-packages", "dist-packages") or os.path.isfile(real)):
            dirs.add(real)
        else:
            checkouts.append(real)
    installed = tuple(d.rstrip(os.sep) + os.sep for d in dirs)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        # torch.ops and friends carry a relative __file__: not a file we could name
        if not isinstance(path, str) or not os.path.isabs(path) or path.startswith(installed):
            continue
        real = os.path.realpath(path)
        if not any(real.startswith(c + os.sep) for c in checkouts):
            continue
        if os.path.basename(real) == "__init__.py":
            files.add(real)
        else:
            dirs.add(os.path.dirname(real))
    dirs = sorted(d for d in dirs if not any(d != o and d.startswith(o.rstrip(os.sep) + os.sep) for o in dirs))
    files = sorted(f for f in files if not any(f.startswith(d.rstrip(os.sep) + os.sep) for d in dirs))
    _python_paths = dirs, files
    return _python_paths


def landlock_rules(inputs_dir: str, work_dir: str) -> list[tuple[str, int]]:
    dirs, files = python_read_paths()
    rules = [(d, READ_EXEC) for d in (*SYSTEM_READ_DIRS, *dirs)]
    rules += [(f, READ_EXEC) for f in (*SYSTEM_READ_FILES, *files)]
    rules += [("/dev/null", READ | LL_WRITE_FILE), (inputs_dir, READ), (work_dir, READ_WRITE)]
    return rules


# --- network namespace (the zygote's) -------------------------------------------------------------------
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def enter_network_namespace() -> tuple[bool, str]:
    """Move this process (the zygote, before it preloads anything) into a new, empty network namespace:
    only a loopback interface, down. Root needs only CLONE_NEWNET; anyone else gets it inside a new user
    namespace mapping their own uid and gid (where the kernel allows unprivileged user namespaces)."""
    if _libc is None:
        return False, f"not Linux ({sys.platform})"
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(ctypes.c_int(CLONE_NEWNET)) == 0:
        return True, "empty network namespace (unshare CLONE_NEWNET)"
    first = os.strerror(ctypes.get_errno())
    if _libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNET)) != 0:
        return False, (f"no network namespace: unshare(CLONE_NEWNET): {first}; with a user namespace: "
                       f"{os.strerror(ctypes.get_errno())}")
    try:
        for name, text in (("uid_map", f"{uid} {uid} 1\n"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1\n")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError as err:
        return False, f"user namespace created but its id maps could not be written ({err}); not used"
    return True, "empty network namespace inside a user namespace (unshare CLONE_NEWUSER | CLONE_NEWNET)"


# --- capabilities, rlimits ------------------------------------------------------------------------------
def capabilities() -> int:
    """The effective capability mask (0 for an ordinary user)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def _cap_last() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except OSError:
        return 40


def _capset(mask: int) -> None:
    header = struct.pack("<Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    low, high = mask & 0xFFFFFFFF, mask >> 32
    data = struct.pack("<6I", low, low, 0, high, high, 0)  # {effective, permitted, inheritable} x 2 words
    if _libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def drop_capabilities(keep: int = 0) -> None:
    """Drop every capability but the `keep` mask: bounding set (needs CAP_SETPCAP, so first), ambient
    set, then effective/permitted/inheritable."""
    for cap in range(_cap_last() + 1):
        if not keep & (1 << cap):
            try:
                prctl(PR_CAPBSET_DROP, cap)
            except OSError:
                pass
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    _capset(keep)
    if capabilities() & ~keep:
        raise OSError(errno.EPERM, "capabilities still held after capset")


CAP_DAC_READ_SEARCH = 2


def become(uid: int, keep: int = 0) -> str:
    """As root: switch to `uid` (and the same gid, no supplementary groups) and drop every capability
    (bounding, ambient, effective, permitted, inheritable) but the `keep` mask. What Python needs to read
    is made reachable by `private_mounts` first, not by a capability; only where that namespace cannot be
    made (a container without CAP_SYS_ADMIN) is CAP_DAC_READ_SEARCH kept for it. A uid of its own gives
    the worker its own RLIMIT_NPROC count (root is exempt from it) and ordinary DAC separation."""
    held = capabilities()
    dropped = [cap for cap in range(_cap_last() + 1) if not keep & (1 << cap)]
    for cap in dropped:  # the bounding set first, while CAP_SETPCAP is still held
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            pass
    prctl(PR_SET_KEEPCAPS, 1 if keep else 0)  # keep the permitted set across setuid only to re-enable `keep`
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # without PR_SET_KEEPCAPS this clears the permitted and effective sets
    prctl(PR_SET_KEEPCAPS, 0)
    drop_capabilities(keep)
    kept = "keeps only CAP_DAC_READ_SEARCH" if keep else "holds no capabilities"
    return f"runs as uid {uid}, its own (the pool runs as root; had 0x{held:x}), and {kept}"


def capability_sets() -> dict[str, int]:
    """CapInh/CapPrm/CapEff/CapBnd/CapAmb of this process, from /proc/self/status."""
    sets = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cap"):
                name, value = line.split(":", 1)
                sets[name] = int(value, 16)
    return sets


# --- a private mount namespace (as root): other sessions hidden, Python reachable without capabilities ---
CLONE_NEWNS = 0x00020000
MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 8, 4096, 16384, 1 << 18


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(None if source is None else os.fsencode(source), os.fsencode(target),
                       None if fstype is None else fstype.encode(), ctypes.c_ulong(flags),
                       None if data is None else ctypes.c_char_p(data.encode())), f"mount on {target}")


def closed_ancestor(path: str) -> str | None:
    """The topmost directory above `path` that others cannot search (no o+x, such as /root), or None."""
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts)):
        ancestor = os.sep.join(parts[:i])
        try:
            mode = os.stat(ancestor).st_mode
        except OSError:
            return None
        if stat.S_ISDIR(mode) and not mode & 0o001:
            return ancestor
    return None


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            field = line.split()[4]  # octal escapes for space, tab, newline and backslash
            points.append(field.encode().decode("unicode_escape"))
    return points


def _cover(directory: str, keep: list[str], mode: int) -> None:
    """Mount a small root-owned tmpfs over `directory` and bind each path of `keep` (below it) back at its
    own path: the rest of `directory` is gone from this namespace. Each path is opened before the cover
    goes on, so the bind takes the real one."""
    held = []
    try:
        for path in sorted(set(keep)):
            if any(path.startswith(other + os.sep) for other in keep):
                continue  # comes along with its ancestor's bind
            try:
                held.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
            except FileNotFoundError:
                continue
        _mount("tirlab-sandbox", directory, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               f"size=65536,nr_inodes={16 + sum(path.count(os.sep) for path, _ in held)},mode={mode:o},uid=0,gid=0")
        for path, fd in held:
            below = directory
            for part in os.path.relpath(path, directory).split(os.sep)[:-1]:
                below = os.path.join(below, part)
                if not os.path.isdir(below):
                    os.mkdir(below)
                    os.chmod(below, 0o755)  # not the zygote's umask
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(path)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    finally:
        for _, fd in held:
            os.close(fd)


def private_mounts(pool_root: str, session_dir: str, read_paths: list[str]) -> str:
    """As root, before the uid changes: move into a mount namespace of this process's own (private: no
    mount propagates in or out), where the pool root holds only this session's directory (other
    sessions' names, files and activity are gone: stat or watch them and they do not exist) and every
    directory others cannot search above what Python reads (such as /root for /root/.pyenv) is covered
    by a tmpfs with just those paths bound back, so the worker reads Python without any capability."""
    if _libc is None:
        raise OSError(errno.ENOSYS, "mount namespaces: not Linux")
    _check(_libc.unshare(ctypes.c_int(CLONE_NEWNS)), "unshare(CLONE_NEWNS)")
    try:
        return _set_apart(os.path.realpath(pool_root), os.path.realpath(session_dir), read_paths)
    except OSError as err:  # half done: whatever it hid, it may not have bound back
        raise MountsFailed(f"the private mounts failed halfway: {err}") from None


class MountsFailed(Exception):
    """The worker's own mount namespace exists but is not as planned: the worker must not run code."""


def _set_apart(pool_root: str, session_dir: str, read_paths: list[str]) -> str:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Other sessions' tmpfs work dirs were copied into this namespace: beneath the cover they would stay
    # mounted (and their memory held) as long as this worker lives, so detach them first
    inside = pool_root.rstrip(os.sep) + os.sep
    others = [p for p in _mount_points() if p.startswith(inside)
              and not (p == session_dir or p.startswith(session_dir + os.sep))]
    for point in sorted(set(others), key=len, reverse=True):
        try:
            unmount(point)
        except OSError:
            pass
    _cover(pool_root, [session_dir], 0o711)
    covers: dict[str, list[str]] = {}
    for path in [*read_paths, pool_root]:
        closed = closed_ancestor(path)
        if closed is not None:
            covers.setdefault(closed, []).append(os.path.realpath(path))
    for closed in sorted(covers, key=len, reverse=True):
        _cover(closed, covers[closed], 0o755)
    where = (f"; {', '.join(sorted(covers))} (closed to others) covered by a tmpfs holding only what Python reads"
             if covers else "")
    return f"a private mount namespace: the pool root shows only this session's directory{where}"


def count_tasks(uid: int) -> int:
    """Processes and threads of `uid` right now (what RLIMIT_NPROC counts)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if line.startswith(("Uid:", "Threads:")))
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return total


def vm_size() -> int:
    """Bytes of address space this process maps now (VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError(errno.ENOENT, "no VmSize in /proc/self/status")


def set_limits(address_space: int, cpu_s: int, file_size: int, open_files: int, tasks: int) -> str:
    """Every rlimit with its soft limit equal to its hard one, so the code cannot raise its own (setrlimit
    may raise a soft limit up to the hard one): ours as given, the others at their inherited soft value."""
    limits = {
        resource.RLIMIT_NPROC: tasks,  # threads too: a thread bomb with tiny stacks must not exhaust pids
        resource.RLIMIT_AS: address_space,
        resource.RLIMIT_CPU: cpu_s,  # SIGKILL at the limit (soft = hard: no SIGXCPU first)
        resource.RLIMIT_FSIZE: file_size,
        resource.RLIMIT_NOFILE: open_files,
        resource.RLIMIT_CORE: 0,
    }
    every = range(16)  # Linux's 16 limits (RLIM_NLIMITS), RLIMIT_LOCKS included, which Python does not name
    for which in every:
        soft, hard = resource.getrlimit(which)
        value = limits.get(which, soft)
        if hard != resource.RLIM_INFINITY and (value == resource.RLIM_INFINITY or value > hard):
            value = hard  # never raise: an unprivileged hard limit cannot go up
        resource.setrlimit(which, (value, value))
    return (f"address space {address_space >> 20} MB, CPU {cpu_s} s, file size {file_size >> 20} MB, "
            f"{open_files} open files, {tasks} tasks for its uid, no core dumps; soft = hard for all {len(every)} "
            "limits (the code cannot raise one)")


# --- the work dir's tmpfs (mounted by a pool running as root) -------------------------------------------
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8


def mount_tmpfs(path: str, size: int, inodes: int, uid: int, gid: int, mode: int) -> None:
    """Mount a tmpfs of `size` bytes and `inodes` inodes on `path`: a quota the kernel enforces (ENOSPC)
    that counts everything, files deleted while still open included."""
    if _libc is None:
        raise OSError(errno.ENOSYS, "mount: not Linux")
    options = f"size={size},nr_inodes={inodes},mode={mode:o},uid={uid},gid={gid}".encode()
    _check(_libc.mount(b"tirlab-sandbox", os.fsencode(path), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                       ctypes.c_char_p(options)), f"mount a tmpfs on {path}")


def unmount(path: str) -> None:
    """Detach the mount on `path` now; the kernel frees it once nothing uses it (a dying worker may)."""
    _check(_libc.umount2(os.fsencode(path), ctypes.c_int(MNT_DETACH | UMOUNT_NOFOLLOW)), f"umount {path}")
