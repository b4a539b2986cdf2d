"""The sandbox's seccomp filter, built here as a classic BPF program (stdlib only).

The filter (handed to bubblewrap with ``--seccomp FD``) lets every system call through except:

- ones that reach past the namespaces or into the kernel: ptrace, process_vm_readv/writev,
  mount and the new mount API, umount2, pivot_root, chroot, setns, unshare, keyrings, bpf,
  perf_event_open, io_uring, userfaultfd, module and kexec loading, handles by inode
  (open_by_handle_at), pidfd_getfd, the clocks, swap, reboot, syslog, acct, quotas, ioperm/iopl;
- new processes: fork, vfork, and clone without CLONE_THREAD (threads stay possible: glibc
  makes them with clone after clone3 fails with ENOSYS); clone with any namespace flag;
- every call of another ABI (i386 ``int 0x80`` on x86_64, or x32), whose numbers differ.

A denied call fails with EPERM (clone3 with ENOSYS), so the program sees an ordinary error.
Numbers are per architecture: x86_64 (``asm/unistd_64.h``) and aarch64 (``asm-generic/unistd.h``);
`tests/envs/test_sandbox_escapes.py` checks them against the headers when they are installed.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["DENIED", "build_filter"]

# Kernel constants (linux/seccomp.h, linux/audit.h, linux/bpf_common.h, linux/sched.h).
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = (
    0x00000080  # CLONE_NEWTIME
    | 0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_{JEQ,JGE,JSET} | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg 0's low word: little endian)

DENIED = (
    # past the namespaces: other processes' memory, mounts, namespaces
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "setns", "unshare",
    "open_by_handle_at", "name_to_handle_at",
    # kernel attack surface no math program needs
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init", "lookup_dcookie",
    # machine-wide state
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff",
    "reboot", "syslog", "acct", "quotactl", "quotactl_fd", "vhangup", "nfsservctl",
    "iopl", "ioperm", "uselib",
    # new processes (clone is checked by its flags below)
    "fork", "vfork",
)  # fmt: skip

SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
        "pidfd_getfd": 438, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442, "setns": 308, "unshare": 272,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "keyctl": 250, "add_key": 248,
        "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "fanotify_init": 300, "lookup_dcookie": 212, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "settimeofday": 164,
        "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "swapon": 167,
        "swapoff": 168, "reboot": 169, "syslog": 103, "acct": 163, "quotactl": 179,
        "quotactl_fd": 443, "vhangup": 153, "nfsservctl": 180, "iopl": 172, "ioperm": 173,
        "uselib": 134, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435,
    },
    "aarch64": {  # no fork, vfork, iopl, ioperm or uselib on this architecture
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
        "pidfd_getfd": 438, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442, "setns": 268, "unshare": 97,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "keyctl": 219, "add_key": 217,
        "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "fanotify_init": 262, "lookup_dcookie": 18, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "settimeofday": 170,
        "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "swapon": 224,
        "swapoff": 225, "reboot": 142, "syslog": 116, "acct": 89, "quotactl": 60,
        "quotactl_fd": 443, "vhangup": 58, "nfsservctl": 42, "clone": 220, "clone3": 435,
    },
}  # fmt: skip


def _assemble(program: list[tuple[int, str | int, str | int, int] | str]) -> bytes:
    """Pack `(code, jt, jf, k)` instructions into `struct sock_filter`s; a str item is a label
    and a str jump target is the label it jumps to (classic BPF jumps only forward)."""
    labels: dict[str, int] = {}
    instructions = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)
    packed = []
    for index, (code, jt, jf, k) in enumerate(instructions):
        offsets = [labels[t] - index - 1 if isinstance(t, str) else t for t in (jt, jf)]
        if not all(0 <= off <= 255 for off in offsets):
            raise ValueError(f"BPF jump out of range at instruction {index}: {offsets}")
        packed.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
    return b"".join(packed)


def build_filter(machine: str | None = None) -> bytes:
    """The filter for `machine` (default: this one) as bytes for bwrap's ``--seccomp FD``.

    Args:
        machine (`str | None`): ``platform.machine()`` of the target: "x86_64" (or "amd64") or
            "aarch64" (or "arm64").

    Returns:
        The packed BPF program (8 bytes per instruction).

    Raises:
        RuntimeError: on another architecture, naming the ones supported.
    """
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine or platform.machine().lower())
    arch = arch or (machine or platform.machine().lower())
    if arch not in SYSCALLS:
        raise RuntimeError(
            f"the sandbox's seccomp filter knows the system calls of x86_64 and aarch64 only, "
            f"not {arch!r}; use isolation='hook' (not a security boundary) on this machine"
        )
    numbers = SYSCALLS[arch]
    deny_errno = SECCOMP_RET_ERRNO | errno.EPERM
    program: list = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 1, 0, AUDIT_ARCH[arch]),
        (_RET, 0, 0, deny_errno),  # another ABI: its numbers mean other calls
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == "x86_64":
        program.append((_JGE, "deny", 0, X32_SYSCALL_BIT))
    program += [(_JEQ, "clone", 0, numbers["clone"]), (_JEQ, "enosys", 0, numbers["clone3"])]
    program += [(_JEQ, "deny", 0, numbers[name]) for name in DENIED if name in numbers]
    program += [
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "clone",
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JSET, "deny", 0, CLONE_NAMESPACES),
        (_JSET, "allow", "deny", CLONE_THREAD),  # a thread, else a new process
        "allow",
        (_RET, 0, 0, SECCOMP_RET_ALLOW),
        "enosys",
        (_RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),  # clone3: glibc falls back to clone
        "deny",
        (_RET, 0, 0, deny_errno),
    ]
    return _assemble(program)
