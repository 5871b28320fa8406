# Loaded by the openstack command through PYTHONPATH in the CLI test: every
# name lookup and connection to a non-loopback address is refused and
# written to $CLITEST_ESCAPES, so the test fails if the client tries to
# leave the machine.
import ipaddress
import os
import socket

_escapes = os.environ.get("CLITEST_ESCAPES")


def _loopback(host):
    if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse(what):
    if _escapes:
        with open(_escapes, "a") as f:
            f.write(what + "\n")
    raise OSError("clitest: refused to leave loopback: " + what)


_getaddrinfo = socket.getaddrinfo


def _literal(host):
    try:
        ipaddress.ip_address(str(host).split("%")[0])
        return True
    except ValueError:
        return False


def _guarded_getaddrinfo(host, *args, **kwargs):
    # An address literal needs no lookup; its connection is checked below.
    if isinstance(host, bytes):
        host = host.decode()
    if host is not None and not _loopback(host) and not _literal(host):
        _refuse("lookup %s" % host)
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _guarded_getaddrinfo


def _guard_by_name(f):
    def guarded(host, *args, **kwargs):
        if not _loopback(host) and not _literal(host):
            _refuse("lookup %s" % host)
        return f(host, *args, **kwargs)
    return guarded


socket.gethostbyname = _guard_by_name(socket.gethostbyname)
socket.gethostbyname_ex = _guard_by_name(socket.gethostbyname_ex)

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _check(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
        _refuse("connect %s" % (address,))


def _guarded_connect(self, address):
    _check(self, address)
    return _connect(self, address)


def _guarded_connect_ex(self, address):
    _check(self, address)
    return _connect_ex(self, address)


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
