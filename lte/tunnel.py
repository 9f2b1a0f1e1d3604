"""Reach a TCP service that listens on an SSH host's loopback (MongoDB on the EPC) from here.

Open5GS's MongoDB listens on 127.0.0.1 of the EPC by default, so mplab provisions
subscribers through the EPC's SSH connection: a listener on this machine's loopback
whose connections become ``direct-tcpip`` channels on the ``SSHHost``'s transport (what
``ssh -L`` does). Closing it closes every forwarded connection.
"""
from __future__ import annotations

import logging
import socket
import threading


log = logging.getLogger("mplab.lte")


class LocalForward:
    """127.0.0.1:<port> here -> ``remote`` as seen from ``host`` (an ``SSHHost``); a context manager."""

    def __init__(self, host, remote: tuple[str, int] = ("127.0.0.1", 27017)) -> None:
        self.host = host
        self.remote = remote
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._closed = threading.Event()
        self._open: list = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name=f"forward-{host.name}", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            try:
                chan = self.host.connect().open_channel("direct-tcpip", self.remote, client.getsockname())
            except Exception as exc:  # noqa: BLE001 - report and drop this one connection
                log.warning("[%s] cannot forward to %s:%d: %s", self.host.name, *self.remote, exc)
                client.close()
                continue
            with self._lock:
                self._open += [client, chan]
            for src, dst in ((client, chan), (chan, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src, dst) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except (OSError, EOFError):
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        """Stop listening and close every forwarded connection; idempotent."""
        self._closed.set()
        self._sock.close()
        with self._lock:
            for s in self._open:
                try:
                    s.close()
                except OSError:
                    pass
            self._open.clear()
        self._thread.join(timeout=2)

    def __enter__(self) -> LocalForward:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
