package dev.rdmarun.runtime.soft;

import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.WrOpcode;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.jctools.queues.atomic.MpscAtomicArrayQueue;

/**
 * The software fabric between processes: each context listens on an ephemeral TCP port (its
 * LID) and opens one connection per remote context it sends requests to; responses return on
 * the connection their request came on.
 *
 * <p>Wire: each side first sends {@value #MAGIC_TEXT} and a version (u16), then frames: a u32
 * length, a {@value #HEADER}-byte header (kind, opcode, rnr timer, QPNs, PSN, LID, remote
 * address, rkey, immediate, atomic operands, READ length, payload length) and the payload, all big-endian.
 * Everything read is checked (kind, opcode, 24-bit QPNs and PSNs, lengths up to max_msg_sz); a
 * connection that sends anything else is closed, and what was in flight on it is lost, which the
 * requesters' retry timers turn into RETRY_EXC_ERR, as a real fabric would.
 */
final class TcpTransport {
    static final String MAGIC_TEXT = "RDSW";
    static final int MAGIC = 0x52445357;
    static final int VERSION = 1;
    static final int HEADER = 60;
    private static final int QUEUE = 1 << 14;
    private static final int CONNECT_TIMEOUT_MS = 3000;
    private static final long RECONNECT_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(200);

    private final SoftContext context;
    private final ServerSocket server;
    private final ConcurrentHashMap<InetSocketAddress, Connection> outbound = new ConcurrentHashMap<>();
    private final Set<Connection> connections = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    private TcpTransport(SoftContext context, ServerSocket server) {
        this.context = context;
        this.server = server;
        Thread.ofVirtual().name(context.deviceName() + "-accept").start(this::acceptLoop);
    }

    /** Listens on an ephemeral port of every address: the port is the context's LID. */
    static TcpTransport listen(SoftContext context) {
        try {
            ServerSocket server = new ServerSocket();
            server.bind(new InetSocketAddress(0));
            if (server.getLocalPort() > 0xffff) throw new IOException("port does not fit a LID");
            return new TcpTransport(context, server);
        } catch (IOException e) {
            throw new VerbsException("the software provider cannot listen on a TCP port: " + e.getMessage(),
                    "soft0 QPs reach other processes over TCP; check that this process may open a listening socket");
        }
    }

    int port() {
        return server.getLocalPort();
    }

    /** The connection that carries requests to this remote context (connected on first use). */
    Link connectionTo(InetSocketAddress remote) {
        return outbound.computeIfAbsent(remote, r -> start(new Connection(r, null)));
    }

    private Connection start(Connection c) {
        connections.add(c);
        c.writer = Thread.ofVirtual().name(context.deviceName() + "-tcp-writer").start(c::writeLoop);
        return c;
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                Socket s = server.accept();
                s.setTcpNoDelay(true);
                start(new Connection(null, s));
            } catch (IOException e) {
                if (closed) return;
            }
        }
    }

    void close() {
        closed = true;
        try {
            server.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        for (Connection c : connections) c.close();
    }

    /** One TCP connection: a writer thread drains the outbound queue, a reader delivers to the engine. */
    final class Connection implements Link {
        private final InetSocketAddress remote;
        private final MpscAtomicArrayQueue<Packet> out = new MpscAtomicArrayQueue<>(QUEUE);
        private volatile Socket socket;
        private volatile boolean writerSleeping;
        private volatile boolean dead;
        Thread writer;

        Connection(InetSocketAddress remote, Socket accepted) {
            this.remote = remote;
            this.socket = accepted;
        }

        @Override
        public boolean offer(Packet p) {
            if (dead || closed) {
                p.release(); // nobody to deliver to: the packet is lost
                return true;
            }
            if (!out.offer(p)) return false;
            if (writerSleeping) LockSupport.unpark(writer);
            return true;
        }

        void writeLoop() {
            long retryAfter = 0;
            DataOutputStream output = null;
            while (!closed && !dead) {
                try {
                    if (output == null) {
                        if (socket == null) {
                            if (out.isEmpty() || System.nanoTime() - retryAfter < 0) {
                                sleep();
                                continue;
                            }
                            Socket s = new Socket();
                            s.setTcpNoDelay(true);
                            s.connect(remote, CONNECT_TIMEOUT_MS);
                            socket = s;
                        }
                        output = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 16));
                        output.writeInt(MAGIC);
                        output.writeShort(VERSION);
                        output.flush();
                        Socket s = socket;
                        Thread.ofVirtual().name(context.deviceName() + "-tcp-reader").start(() -> readLoop(s));
                    }
                    Packet p = out.poll();
                    if (p == null) {
                        output.flush();
                        sleep();
                        continue;
                    }
                    try {
                        write(output, p);
                    } finally {
                        p.release();
                    }
                } catch (IOException | RuntimeException e) {
                    // The connection failed: what is queued is lost (requesters retry and time out).
                    output = null;
                    closeSocket();
                    drop();
                    if (remote == null) {
                        dead = true; // an accepted connection is not re-made by this side
                    } else {
                        retryAfter = System.nanoTime() + RECONNECT_BACKOFF_NANOS;
                    }
                }
            }
            drop();
        }

        private void sleep() {
            writerSleeping = true;
            if (out.isEmpty() && !closed) LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(50));
            writerSleeping = false;
        }

        private void drop() {
            Packet p;
            while ((p = out.poll()) != null) p.release();
        }

        private void readLoop(Socket s) {
            try (DataInputStream input = new DataInputStream(new BufferedInputStream(s.getInputStream(), 1 << 16))) {
                if (input.readInt() != MAGIC || input.readUnsignedShort() != VERSION) return;
                while (!closed) {
                    Packet p = context.pool.acquire();
                    if (!read(input, p)) {
                        p.release();
                        return;
                    }
                    p.replyLink = this;
                    while (!context.engine.deliver(p)) {
                        if (closed) {
                            p.release();
                            return;
                        }
                        LockSupport.parkNanos(10_000);
                    }
                }
            } catch (IOException | RuntimeException e) {
                // peer gone or garbage: the connection ends
            } finally {
                if (socket == s) closeSocket();
                if (remote == null) {
                    dead = true; // an accepted connection ends with its socket: forget it
                    connections.remove(this);
                    LockSupport.unpark(writer);
                }
            }
        }

        void close() {
            dead = true;
            closeSocket();
            if (writer != null) LockSupport.unpark(writer);
        }

        private void closeSocket() {
            Socket s = socket;
            socket = null;
            if (s != null) {
                try {
                    s.close();
                } catch (IOException ignored) {
                    // closing anyway
                }
            }
        }
    }

    static void write(DataOutputStream o, Packet p) throws IOException {
        o.writeInt(HEADER + p.length);
        o.writeByte(p.kind);
        o.writeByte(p.opcode);
        o.writeByte(p.rnrTimer);
        o.writeByte(0);
        o.writeInt(p.dstQpn);
        o.writeInt(p.srcQpn);
        o.writeInt(p.psn);
        o.writeInt(p.srcLid);
        o.writeLong(p.remoteAddress);
        o.writeInt(p.rkey);
        o.writeInt(p.imm);
        o.writeLong(p.compareAdd);
        o.writeLong(p.swap);
        o.writeInt(p.readLength);
        o.writeInt(p.length);
        o.write(p.data, 0, p.length);
    }

    /** Reads one frame into p; false (and nothing usable in p) when the frame is not a valid packet. */
    static boolean read(DataInputStream in, Packet p) throws IOException {
        int frame = in.readInt();
        if (frame < HEADER || frame - HEADER > SoftContext.MAX_MESSAGE) return false;
        p.kind = in.readUnsignedByte();
        p.opcode = in.readUnsignedByte();
        p.rnrTimer = in.readUnsignedByte();
        in.readUnsignedByte();
        p.dstQpn = in.readInt();
        p.srcQpn = in.readInt();
        p.psn = in.readInt();
        p.srcLid = in.readInt();
        p.remoteAddress = in.readLong();
        p.rkey = in.readInt();
        p.imm = in.readInt();
        p.compareAdd = in.readLong();
        p.swap = in.readLong();
        p.readLength = in.readInt();
        int length = in.readInt();
        if (length != frame - HEADER || !valid(p)) return false;
        p.ensureCapacity(length);
        in.readFully(p.data, 0, length);
        p.length = length;
        return true;
    }

    private static boolean valid(Packet p) {
        if (p.kind < Packet.REQUEST || p.kind > Packet.MAX_KIND) return false;
        if (p.kind == Packet.REQUEST && WrOpcode.of(p.opcode) == null) return false;
        if (p.kind == Packet.NAK && (p.opcode < 1 || p.opcode > Packet.MAX_SYNDROME)) return false;
        if (p.rnrTimer > 31 || p.readLength < 0 || p.readLength > SoftContext.MAX_MESSAGE) return false;
        if ((p.dstQpn & ~0xffffff) != 0 || (p.srcQpn & ~0xffffff) != 0 || (p.psn & ~0xffffff) != 0) return false;
        return (p.srcLid & ~0xffff) == 0;
    }
}
