"""What an untrusted process tries once it has escaped Python (issue 46): the source of `probe`, run as a
codeopt candidate with the Python layers off (escaped_task.py) or as a task folder's script. Plain
ctypes and os, no import of ours: it runs inside the sandbox.

- `probe("escape", ...)`: each way out of points 1 to 4 and 7: which user it is; a key in the user's
  keyring; chmod, utime and setxattr on a file root owns outside the sandbox; a new user namespace (and,
  inside one, a raw socket); netlink, packet and vsock sockets; another evaluation cgroup's processes
  and limits. Each answer is 0 (it worked) or the errno that refused it.
- `probe("leave", ...)` then, in the next experiment, `probe("find", ...)`: a key, System V shared
  memory, a message queue and a semaphore set, a POSIX shared memory file, a file in /tmp, an abstract
  Unix socket; what the second finds of what the first left (1: found).
"""

SOURCE = '''
import ctypes as _ctypes
import os as _os
import socket as _socket

_LIBC = _ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = _ctypes.c_long
_KEYS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[_os.uname().machine]
_USER_KEYRING, _IPC_CREAT = -4, 0o1000
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000


def _errno(call):
    """0 when `call` worked, else the errno that refused it (ctypes' -1, or an OSError)."""
    _ctypes.set_errno(0)
    try:
        value = call()
    except OSError as exc:
        return exc.errno or -1
    if isinstance(value, int) and value < 0:
        return _ctypes.get_errno() or -1
    if isinstance(value, _socket.socket):
        value.close()
    return 0


def _read(path):
    with open(path) as file:
        return file.read()


def _in_a_user_namespace():
    """unshare(CLONE_NEWUSER | CLONE_NEWNET), in a fork (where the task may fork), then a raw socket
    inside: what a new user namespace hands back."""
    if _LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return _ctypes.get_errno()
    return 1000 + _errno(lambda: _socket.socket(_socket.AF_PACKET, _socket.SOCK_RAW))


def probe(what, key, canary="", cgroup=""):
    name = f"autoresearch-probe-{key}".encode()
    path = f"autoresearch-probe-{key}"
    if what == "escape":
        found = {"uid": _os.getuid()}
        found["add_key"] = _errno(lambda: _LIBC.syscall(_KEYS[0], b"user", name, b"x", 1, _USER_KEYRING))
        found["chmod"] = _errno(lambda: _os.chmod(canary, 0o6777))
        found["utime"] = _errno(lambda: _os.utime(canary, (1, 1)))
        found["setxattr"] = _errno(lambda: _os.setxattr(canary, "user.probe", b"x"))
        for family, kind in (("AF_NETLINK", 3), ("AF_PACKET", 3), ("AF_VSOCK", 1)):  # raw, stream
            number = getattr(_socket, family, {"AF_VSOCK": 40, "AF_PACKET": 17}.get(family))
            found[family] = _errno(lambda: _socket.socket(number, kind))
        if cgroup:
            found["cgroup_procs"] = _errno(lambda: _read(_os.path.join(cgroup, "cgroup.procs")))
            found["cgroup_list"] = _errno(lambda: _os.listdir(_os.path.dirname(cgroup)))
        found["user_namespace"] = _in_a_user_namespace()  # last: where it works, this process is in it
        return found
    if what == "leave":
        _LIBC.syscall(_KEYS[0], b"user", name, b"secret", 6, _USER_KEYRING)
        _LIBC.shmget(key, 4096, _IPC_CREAT | 0o666)
        _LIBC.msgget(key, _IPC_CREAT | 0o666)
        _LIBC.semget(key, 1, _IPC_CREAT | 0o666)
        for directory in ("/dev/shm", "/tmp"):
            try:
                open(_os.path.join(directory, path), "w").close()
            except OSError:
                pass
        try:
            held = _socket.socket(_socket.AF_UNIX)
            held.bind(b"\\0" + name)
            held.listen()
        except OSError:
            pass
        return {}
    return {
        "keyring": int(_LIBC.syscall(_KEYS[1], b"user", name, None, _USER_KEYRING) >= 0),
        "shm": int(_LIBC.shmget(key, 0, 0) >= 0),
        "msg": int(_LIBC.msgget(key, 0) >= 0),
        "sem": int(_LIBC.semget(key, 0, 0) >= 0),
        "dev_shm": int(_os.path.exists(_os.path.join("/dev/shm", path))),
        "tmp": int(_os.path.exists(_os.path.join("/tmp", path))),
        "abstract_socket": int(_errno(lambda: _socket.socket(_socket.AF_UNIX).connect(b"\\0" + name)) == 0),
    }
'''
