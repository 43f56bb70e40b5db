#!/usr/bin/env python3
"""What e2e/hostile.sh attacks rdma-run with: a third process on the same host, standard library only.

Every mode is bounded in time and prints one result line, key=value pairs, for the suite to check:

  soft0-forge HOST PORT [LID...]
                            speaks soft0's old unauthenticated wire: forged READs and WRITEs posing
                            as the peer at LID, for guessed QPNs, rkeys and PSNs; what came back
  flood HOST PORT SECONDS   streams 1 KiB soft0-like frames for unknown QPNs on two connections
  drip HOST PORT SECONDS    sends one byte a second (the control connection's magic, then a frame)
  stray HOST PORT HEX       sends HEX, then reads what the listener answers until it closes
                            (text= shows it, escaped)
  drip-server PORT SECONDS  listens; to whoever connects, sends one byte a second
  scan HOST PORT N          opens and closes N connections (a port scan)
  idle HOST PORT N SECONDS  holds N idle connections (nothing sent) for SECONDS, opening a new one
                            whenever the listener closes one, so they keep its unauthenticated slots
"""
import select
import signal
import socket
import struct
import sys
import threading
import time

SOFT_MAGIC = 0x52445357  # "RDSW"
CONTROL_MAGIC = b"RDRN"  # the control connection's magic: the drip looks like a real peer
# What a drip sends, a byte a second: the magic, then a frame that announces 1000 bytes of JSON.
DRIP = CONTROL_MAGIC + struct.pack(">i", 1000) + b"{" * 1000


def connect(host, port, timeout=5.0):
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_until_closed(s, seconds):
    """Bytes the peer sent until it closed (or seconds passed); and whether it closed."""
    got = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except OSError:
            return got, True
        if not chunk:
            return got, True
        got += chunk
    return got, False


def soft_frame(kind, opcode, dst_qpn, src_qpn, psn, src_lid, address, rkey, read_length, payload=b""):
    header = struct.pack(">BBBBiiiiqiiqqii", kind, opcode, 0, 0, dst_qpn, src_qpn, psn, src_lid, address, rkey, 0,
                         0, 0, read_length, len(payload))
    return struct.pack(">i", len(header) + len(payload)) + header + payload


def soft0_forge(host, port, *src_lids):
    s = connect(host, port)
    start = time.monotonic()
    sent = 0
    try:
        s.sendall(struct.pack(">iH", SOFT_MAGIC, 1))
        # READ (opcode 4) and WRITE (opcode 0) posing as the real peer (its LID, the first QPNs an old
        # soft0 handed out), with the first rkeys it handed out, and PSNs in both halves of the window
        # (one of them looks like a duplicate, which a responder answers again).
        for lid in [int(x) for x in src_lids] or [0]:
            for dst in range(16, 19):
                for src in range(16, 19):
                    for rkey in (0x101, 0x201, 0x102):
                        for psn in (0, 0x800000):
                            s.sendall(soft_frame(1, 4, dst, src, psn, lid, 0, rkey, 64))
                            s.sendall(soft_frame(1, 0, dst, src, psn, lid, 0, rkey, 0, b"\xee" * 64))
                            sent += 2
    except OSError:
        pass
    got, closed = read_until_closed(s, 8)
    s.close()
    print(f"frames_sent={sent} bytes_received={len(got)} closed={int(closed)} seconds={time.monotonic() - start:.1f}")


def flood(host, port, seconds):
    """Two threads, each streaming frames and reconnecting whenever the listener closes it."""
    stop = time.monotonic() + float(seconds)
    totals = []

    def one():
        sent, closed = 0, 0
        frame = soft_frame(1, 2, 0x777777, 16, 0, 0, 0, 0, 0, b"\xab" * 1024)
        while time.monotonic() < stop:
            try:
                s = connect(host, port)
                s.sendall(struct.pack(">iH", SOFT_MAGIC, 2) + b"\0" * 40)  # a hello with a made-up key id
                while time.monotonic() < stop:
                    s.sendall(frame)
                    sent += len(frame)
                s.close()
            except OSError:
                closed += 1
        totals.append((sent, closed))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"bytes_sent={sum(t[0] for t in totals)} connections_closed_by_listener={sum(t[1] for t in totals)}")


def drip_into(s, seconds):
    """Sends DRIP a byte a second until the other end closes or seconds pass; (closed, elapsed)."""
    start = time.monotonic()
    for b in DRIP:
        if time.monotonic() - start > float(seconds):
            break
        try:
            s.sendall(bytes([b]))
        except OSError:
            return True, time.monotonic() - start
        _, closed = read_until_closed(s, 1.0)
        if closed:
            return True, time.monotonic() - start
    return False, time.monotonic() - start


def drip(host, port, seconds):
    s = connect(host, port)
    closed, elapsed = drip_into(s, seconds)
    print(f"closed={int(closed)} seconds={elapsed:.1f}")
    s.close()


def stray(host, port, hexdata):
    s = connect(host, port)
    start = time.monotonic()
    try:
        s.sendall(bytes.fromhex(hexdata))
    except OSError:
        pass
    got, closed = read_until_closed(s, 15)
    s.close()
    text = got.decode("latin-1").encode("unicode_escape").decode("ascii")
    print(f"bytes_received={len(got)} closed={int(closed)} seconds={time.monotonic() - start:.1f} text={text[:2000]}")


def drip_server(port, seconds):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(port)))
    srv.listen(4)
    srv.settimeout(float(seconds))
    print("listening", flush=True)
    try:
        c, _ = srv.accept()
    except socket.timeout:
        print("accepted=0")
        return
    closed, elapsed = drip_into(c, seconds)
    print(f"accepted=1 closed={int(closed)} seconds={elapsed:.1f}")


def scan(host, port, n):
    refused = 0
    for _ in range(int(n)):
        try:
            connect(host, port, 2).close()
        except OSError:
            refused += 1
    print(f"connections={n} refused={refused}")


def idle(host, port, n, seconds):
    """N idle connections, each replaced as soon as the listener closes it; says when all N were open."""
    stop = time.monotonic() + float(seconds)
    held, opened, closed, failed = [], 0, 0, 0
    ready = False
    ended = []
    signal.signal(signal.SIGTERM, lambda *_: ended.append(1))  # the suite ends it: still print the counts
    while time.monotonic() < stop and not ended:
        while len(held) < int(n) and time.monotonic() < stop and not ended:
            try:
                s = connect(host, port, 2)
                # Closed with a reset: tens of thousands of replaced connections leave no TIME_WAIT behind.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                held.append(s)
                opened += 1
            except OSError:
                failed += 1
                time.sleep(0.02)  # the listener is gone or its backlog is full: not a busy loop
        if not ready:
            print(f"holding {n} idle connections", flush=True)
            ready = True
        readable, _, _ = select.select(held, [], [], 0.02)
        for s in readable:
            try:
                gone = not s.recv(64)
            except OSError:
                gone = True
            if gone:
                s.close()
                held.remove(s)
                closed += 1
        time.sleep(0.05)  # replaces what was closed every 50 ms: the slots stay taken, the host stays usable
    for s in held:
        s.close()
    print(f"opened={opened} connections_closed_by_listener={closed} failed={failed}")


def main(argv):
    modes = {"soft0-forge": soft0_forge, "flood": flood, "drip": drip, "stray": stray,
             "drip-server": drip_server, "scan": scan, "idle": idle}
    if len(argv) < 2 or argv[1] not in modes:
        print(__doc__, file=sys.stderr)
        return 2
    modes[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
