package dev.rdmarun.runtime.ibverbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.rdmarun.runtime.CompletionChannel;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.ibverbs.ffi.Structs;
import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Errno;
import dev.rdmarun.runtime.os.LibC;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

/** ibv_comp_channel, its fd made non-blocking so ibv_get_cq_event never blocks. */
final class NativeCompletionChannel extends CompletionChannel {
    private final NativeContext context;
    final MemorySegment handle;
    private final int fd;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment cqOut;
    private final MemorySegment contextOut;
    private final Errno errno;

    private NativeCompletionChannel(NativeContext context, MemorySegment handle) {
        super(context);
        this.context = context;
        this.handle = handle.reinterpret(Structs.IBV_COMP_CHANNEL.byteSize());
        this.fd = this.handle.get(JAVA_INT, Structs.COMP_CHANNEL_FD);
        this.cqOut = arena.allocate(ADDRESS);
        this.contextOut = arena.allocate(ADDRESS);
        this.errno = new Errno(arena);
        int rc = LibC.setNonBlocking(fd);
        if (rc != 0) throw VerbsException.of("fcntl(O_NONBLOCK) on the completion channel", -rc, null);
    }

    static NativeCompletionChannel create(NativeContext context) {
        return Calls.control((scratch, errno) -> {
            MemorySegment ch = (MemorySegment) context.lib.createCompChannel.invokeExact(errno.segment(), context.handle);
            if (ch.equals(MemorySegment.NULL)) throw VerbsException.of("ibv_create_comp_channel", errno.value(), null);
            return new NativeCompletionChannel(context, ch);
        });
    }

    @Override
    public int fd() {
        return fd;
    }

    @Override
    protected CompletionQueue takeEvent() {
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
        List<CompletionQueue> cqs = attached();
        for (int i = 0, n = cqs.size(); i < n; i++) {
            NativeCompletionQueue cq = (NativeCompletionQueue) cqs.get(i);
            if (cq.handle.address() == address) return cq;
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
