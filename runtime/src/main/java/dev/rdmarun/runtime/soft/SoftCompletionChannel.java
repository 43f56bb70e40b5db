package dev.rdmarun.runtime.soft;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.rdmarun.runtime.CompletionChannel;
import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.VerbsException;
import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Errno;
import dev.rdmarun.runtime.os.LibC;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * A completion channel of soft0: an eventfd (non-blocking) that becomes readable when an armed
 * CQ gets a completion. The dispatcher waits on the fd with poll(2) exactly as on a libibverbs
 * channel. An armed CQ raises at most one event before it is armed again, so each CQ carries its
 * own pending flag and taking events is a scan of the channel's CQs: no queue, no allocation.
 */
final class SoftCompletionChannel extends CompletionChannel {
    private final int fd;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment one;
    private final MemorySegment counter;
    private final Errno errno;

    SoftCompletionChannel(SoftContext context) {
        super(context);
        this.one = arena.allocate(JAVA_LONG);
        this.counter = arena.allocate(JAVA_LONG);
        this.errno = new Errno(arena);
        one.set(JAVA_LONG, 0, 1L);
        try {
            int f = (int) LibC.EVENTFD.invokeExact(errno.segment(), 0, LibC.EFD_NONBLOCK | LibC.EFD_CLOEXEC);
            if (f < 0) throw VerbsException.of("eventfd for the completion channel", errno.value(), null);
            this.fd = f;
        } catch (Throwable t) {
            arena.close();
            throw Calls.unchecked(t);
        }
    }

    @Override
    public int fd() {
        return fd;
    }

    /** An armed CQ got a completion and raised its event (its pending flag is set): wake the waiter. */
    synchronized void signal() {
        if (isClosed()) return;
        try {
            long unused = (long) LibC.WRITE.invokeExact(fd, one, 8L);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    @Override
    protected CompletionQueue takeEvent() {
        CompletionQueue cq = pendingCq();
        if (cq != null) return cq;
        // Reset the fd's counter, then look again: an event raised meanwhile has written the fd after our check.
        synchronized (this) {
            try {
                long unused = (long) LibC.READ.invokeExact(fd, counter, 8L);
            } catch (Throwable t) {
                throw Calls.unchecked(t);
            }
        }
        return pendingCq();
    }

    private CompletionQueue pendingCq() {
        List<CompletionQueue> cqs = attached();
        for (int i = 0, n = cqs.size(); i < n; i++) {
            SoftCompletionQueue cq = (SoftCompletionQueue) cqs.get(i);
            if (cq.takeEvent()) return cq;
        }
        return null;
    }

    @Override
    protected synchronized void destroy() {
        try {
            int unused = (int) LibC.CLOSE.invokeExact(fd);
        } catch (Throwable ignored) {
            // nothing left to do with an fd that does not close
        } finally {
            arena.close();
        }
    }
}
