#!/usr/bin/env python3
"""tcp_blast: what N plain TCP connections carry over loopback.

The yardstick for gemm-service's large jobs (docs/reference/performance.md): N sender
processes each push bytes through their own TCP connection to N receiver
processes for --seconds, with large send/recv buffers and no per-byte work
beyond the kernel's. Prints and writes (--out) JSON with the aggregate and
per-connection bytes/s (bytes received, over the receivers' common time).
Standard library only (the H200 host has no pip).

    python3 bench/tcp_blast.py --connections 4 --seconds 3 --out tcp4.json
"""
import argparse
import json
import multiprocessing as mp
import socket
import time


def receiver(listener, seconds, buffer_bytes, results, index):
    conn, _ = listener.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    buf = bytearray(buffer_bytes)
    view = memoryview(buf)
    total = 0
    first = None
    last = None
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        now = time.perf_counter()
        if first is None:
            first = now
        last = now
        total += n
    conn.close()
    results.put((index, total, first, last))


def sender(port, seconds, buffer_bytes, start_at):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = memoryview(bytes(buffer_bytes))
    while time.perf_counter() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    while time.perf_counter() < end:
        s.sendall(data)
    s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--buffer-bytes", type=int, default=4 << 20)
    p.add_argument("--out", default="")
    a = p.parse_args()
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = []
    ports = []
    for i in range(a.connections):
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        ports.append(ls.getsockname()[1])
        r = ctx.Process(target=receiver,
                        args=(ls, a.seconds, a.buffer_bytes, results, i))
        r.start()
        procs.append(r)
        ls.close()
    start_at = time.perf_counter() + 0.3
    for port in ports:
        s = ctx.Process(target=sender,
                        args=(port, a.seconds, a.buffer_bytes, start_at))
        s.start()
        procs.append(s)
    got = [results.get() for _ in range(a.connections)]
    for proc in procs:
        proc.join()
    total = sum(g[1] for g in got)
    first = min(g[2] for g in got)
    last = max(g[3] for g in got)
    per = [g[1] / (g[3] - g[2]) for g in sorted(got)]
    report = {
        "connections": a.connections,
        "seconds": last - first,
        "buffer_bytes": a.buffer_bytes,
        "bytes": total,
        "aggregate_bytes_per_s": total / (last - first),
        "per_connection_bytes_per_s": per,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
