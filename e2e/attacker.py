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
  echo-intro HOST PORT SECONDS
                            a stranger without the secret or the plan: sends the server's own intro
                            back as a client's (with a nonce of its own), then echoes every frame
                            it gets; prints the frame types it received
  relay LISTEN TARGET UP_FILE DOWN_FILE SECONDS
                            an observer on the path: relays one control connection from 127.0.0.1:LISTEN
                            to 127.0.0.1:TARGET, recording each direction
  replay HOST PORT FILE SECONDS
                            sends a recorded client side of a control connection to a (new) server;
                            prints the frame types it received
  soft0-try-keys HOST PORT FILE...
                            every 64-hex-digit string in the FILEs (a recorded control connection)
                            tried as soft0's fabric key at a soft0 port; authenticated=N counts the
                            keys the port accepted
  idle HOST PORT N SECONDS  holds N idle connections (nothing sent) for SECONDS, opening a new one
                            whenever the listener closes one, so they keep its unauthenticated slots
"""
import hashlib
import hmac
import json
import os
import re
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


def read_frame(s):
    """One control-connection frame as (type, JSON text); raises OSError at the end."""
    def exactly(n):
        got = b""
        while len(got) < n:
            chunk = s.recv(n - len(got))
            if not chunk:
                raise OSError("closed")
            got += chunk
        return got
    length = struct.unpack(">i", exactly(4))[0]
    if length <= 0 or length > 4 << 20:
        raise OSError(f"bad length {length}")
    text = exactly(length).decode("utf-8", "replace")
    try:
        kind = json.loads(text).get("type", "?")
    except ValueError:
        kind = "not-json"
    return kind, text


def send_frame(s, text):
    data = text.encode("utf-8")
    s.sendall(struct.pack(">i", len(data)) + data)


def as_client(text):
    """The server's frame as if the client had sent it: its role flipped, a nonce of its own."""
    text = re.sub(r'"role":"server"', '"role":"CLIENT"', text, flags=re.I)
    return re.sub(r'"nonce":"[0-9a-f]{64}"', '"nonce":"' + os.urandom(32).hex() + '"', text)


def echo_intro(host, port, seconds):
    s = connect(host, port, float(seconds))
    received = []
    try:
        if s.recv(4, socket.MSG_WAITALL) != CONTROL_MAGIC:
            raise OSError("no magic")
        kind, intro = read_frame(s)
        received.append(kind)
        s.sendall(CONTROL_MAGIC)
        send_frame(s, as_client(intro))
        # The server waits for the client's proof first: there is none to copy, so one made of nothing.
        send_frame(s, json.dumps({"type": "proof", "secret": "0" * 64, "sections": {}}, separators=(",", ":")))
        while True:
            kind, text = read_frame(s)
            received.append(kind)
            send_frame(s, as_client(text))
    except OSError:
        pass
    finally:
        s.close()
    print(f"received={','.join(received) or 'nothing'}")


def relay(listen, target, up_file, down_file, seconds):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(listen)))
    server.listen(1)
    server.settimeout(float(seconds))
    try:
        a, _ = server.accept()
    finally:
        server.close()
    b = socket.create_connection(("127.0.0.1", int(target)), timeout=5)
    deadline = time.monotonic() + float(seconds)

    def pump(src, dst, path):
        with open(path, "wb") as out:
            while time.monotonic() < deadline:
                src.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    chunk = src.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
                try:
                    dst.sendall(chunk)
                except OSError:
                    break
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threads = [threading.Thread(target=pump, args=(a, b, up_file)), threading.Thread(target=pump, args=(b, a, down_file))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.close()
    b.close()
    print(f"up_bytes={os.path.getsize(up_file)} down_bytes={os.path.getsize(down_file)}")


def replay(host, port, path, seconds):
    s = connect(host, port, float(seconds))
    received = []
    try:
        with open(path, "rb") as f:
            s.sendall(f.read())
        if s.recv(4, socket.MSG_WAITALL) == CONTROL_MAGIC:
            while True:
                received.append(read_frame(s)[0])
    except OSError:
        pass
    finally:
        s.close()
    print(f"received={','.join(received) or 'nothing'}")


def soft0_try_keys(host, port, *paths):
    keys = set()
    for path in paths:
        with open(path, "rb") as f:
            keys.update(re.findall(rb"[0-9a-f]{64}", f.read()))
    authenticated = 0
    for key_hex in sorted(keys):
        key = bytes.fromhex(key_hex.decode())
        key_id = hashlib.sha256(b"rdma-run soft0 key id" + key).digest()[:8]
        nonce_c = os.urandom(32)
        try:
            s = connect(host, port, 3)
            s.sendall(struct.pack(">IH", SOFT_MAGIC, 2) + key_id + nonce_c)
            reply = s.recv(4 + 2 + 32 + 32, socket.MSG_WAITALL)
            if len(reply) == 70:
                nonce_a, theirs = reply[6:38], reply[38:70]
                mac = hmac.new(key, b"rdma-run soft0 acceptor" + nonce_c + nonce_a, hashlib.sha256).digest()
                if hmac.compare_digest(mac, theirs):
                    authenticated += 1
            s.close()
        except OSError:
            pass
    print(f"tried={len(keys)} authenticated={authenticated}")


def main(argv):
    modes = {"soft0-forge": soft0_forge, "flood": flood, "drip": drip, "stray": stray,
             "drip-server": drip_server, "scan": scan, "echo-intro": echo_intro, "relay": relay,
             "replay": replay, "soft0-try-keys": soft0_try_keys, "idle": idle}
    if len(argv) < 2 or argv[1] not in modes:
        print(__doc__, file=sys.stderr)
        return 2
    modes[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
