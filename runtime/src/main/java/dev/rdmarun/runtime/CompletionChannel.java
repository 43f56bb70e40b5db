package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.ffi.Errno;
import dev.rdmarun.runtime.ffi.LibC;
import dev.rdmarun.runtime.ffi.Structs;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * ibv_comp_channel: a file descriptor that becomes readable when an armed CQ gets a completion.
 * Its fd is non-blocking, so a dispatcher can wait on it with poll(2) beside its own wake-up fd
 * and {@link #nextEvent()} never blocks. Single consumer: the thread that waits on it.
 */
public final class CompletionChannel extends VerbsResource {
    private final Context context;
    final MemorySegment handle;
    private final int fd;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment cqOut;
    private final MemorySegment contextOut;
    private final Errno errno;
    private final CopyOnWriteArrayList<CompletionQueue> cqs = new CopyOnWriteArrayList<>();

    private CompletionChannel(Context context, MemorySegment handle) {
        super("completion channel", context);
        this.context = context;
        this.handle = handle.reinterpret(Structs.IBV_COMP_CHANNEL.byteSize());
        this.fd = this.handle.get(JAVA_INT, Structs.COMP_CHANNEL_FD);
        this.cqOut = arena.allocate(ADDRESS);
        this.contextOut = arena.allocate(ADDRESS);
        this.errno = new Errno(arena);
        int rc = LibC.setNonBlocking(fd);
        if (rc != 0) throw VerbsException.of("fcntl(O_NONBLOCK) on the completion channel", -rc, null);
    }

    static CompletionChannel create(Context context) {
        return Calls.control((scratch, errno) -> {
            MemorySegment ch = (MemorySegment) context.lib.createCompChannel.invokeExact(errno.segment(), context.handle);
            if (ch.equals(MemorySegment.NULL)) throw VerbsException.of("ibv_create_comp_channel", errno.value(), null);
            return new CompletionChannel(context, ch);
        });
    }

    /** The fd to wait on for POLLIN. */
    public int fd() {
        return fd;
    }

    void attach(CompletionQueue cq) {
        cqs.add(cq);
    }

    void detach(CompletionQueue cq) {
        cqs.remove(cq);
    }

    /**
     * Takes one pending completion event: the CQ it is for, or null when none is pending. The event
     * is counted on that CQ and acknowledged in batches ({@link CompletionQueue#acknowledgeEvents()}).
     * Allocation-free.
     */
    public CompletionQueue nextEvent() {
        ensureOpen();
        int rc;
        try {
            rc = (int) context.lib.getCqEvent.invokeExact(errno.segment(), handle, cqOut, contextOut);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
        if (rc != 0) {
            int e = errno.value();
            if (e == Errno.EAGAIN || e == Errno.EINTR) return null;
            throw VerbsException.of("ibv_get_cq_event", e, null);
        }
        long address = cqOut.get(ADDRESS, 0).address();
        for (int i = 0, n = cqs.size(); i < n; i++) {
            CompletionQueue cq = cqs.get(i);
            if (cq.handle.address() == address) {
                cq.eventReceived();
                return cq;
            }
        }
        throw new IllegalStateException("completion event for a CQ this channel does not know");
    }

    @Override
    protected void destroy() {
        try {
            Calls.control((scratch, err) -> {
                int rc = (int) context.lib.destroyCompChannel.invokeExact(err.segment(), handle);
                if (rc != 0) throw VerbsException.of("ibv_destroy_comp_channel", rc > 0 ? rc : err.value(), null);
                return null;
            });
        } finally {
            arena.close();
        }
    }
}
