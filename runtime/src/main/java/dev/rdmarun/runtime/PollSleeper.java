package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Errno;
import dev.rdmarun.runtime.os.LibC;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The native sleep of EVENT mode: poll(2) on a completion channel's fd and a wake-up eventfd that
 * any thread can write to. Apart from {@link EventIdler} because this is the FFM and file
 * descriptor plumbing (its memory, the fd's life), not the decision when to sleep. Created with
 * every dispatcher: its mode can become EVENT later.
 */
final class PollSleeper {
    /** Some dispatcher thread of this JVM has run {@link #warmUp}. */
    private static volatile boolean sleepPathWarm;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment pollFds;
    private final MemorySegment eventValue;
    /** The 1 written to the wake-up eventfd (under wakeFdLock). */
    private final MemorySegment one;
    private final Errno errno;
    private final int wakeFd;
    /** Guarded by itself: a wake-up must never write to the eventfd's number after it is closed and reused. */
    private final Object wakeFdLock = new Object();
    private boolean wakeFdClosed;

    PollSleeper() {
        this.pollFds = arena.allocate(LibC.POLLFD, 2);
        this.eventValue = arena.allocate(JAVA_LONG);
        this.one = arena.allocate(JAVA_LONG);
        one.set(JAVA_LONG, 0, 1L);
        this.errno = new Errno(arena);
        this.wakeFd = createEventFd();
    }

    /**
     * Sleeps until the channel (if not null) has an event, {@link #signal} is called, or
     * [timeoutMillis] pass (negative: no limit). A failed poll (EINTR: a signal) is a wake-up like
     * any other: the loop polls the CQs again.
     */
    void sleep(CompletionChannel channel, int timeoutMillis) throws Throwable {
        int nfds = 0;
        if (channel != null) setPollFd(nfds++, channel.fd());
        setPollFd(nfds++, wakeFd);
        waitForEvents(nfds, timeoutMillis);
    }

    /**
     * Runs the sleep path's native calls with a zero timeout before any work, once per JVM: linking
     * their call sites (~140 KB) and the JDK customizing a method handle at its 128th call from
     * uncompiled code (~30 KB each) would otherwise allocate on the data path at whichever sleep
     * first gets there.
     */
    void warmUp() throws Throwable {
        if (sleepPathWarm) return;
        for (int i = 0; i < 128; i++) {
            setPollFd(0, wakeFd);
            waitForEvents(1, 0);
            drain();
        }
        sleepPathWarm = true;
    }

    /** poll(2) on the first nfds entries of pollFds: one call site for the sleep and its warm-up. */
    private void waitForEvents(int nfds, int timeoutMillis) throws Throwable {
        int unused = (int) LibC.POLL.invokeExact(pollFds, (long) nfds, timeoutMillis);
    }

    private void setPollFd(int index, int fd) {
        long base = index * LibC.POLLFD.byteSize();
        pollFds.set(JAVA_INT, base + LibC.POLLFD_FD, fd);
        pollFds.set(JAVA_SHORT, base + LibC.POLLFD_EVENTS, LibC.POLLIN);
        pollFds.set(JAVA_SHORT, base + LibC.POLLFD_REVENTS, (short) 0);
    }

    private int createEventFd() {
        try {
            int fd = (int) LibC.EVENTFD.invokeExact(errno.segment(), 0, LibC.EFD_NONBLOCK | LibC.EFD_CLOEXEC);
            if (fd < 0) throw VerbsException.of("eventfd", errno.value(), null);
            return fd;
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    /** Ends a sleep, or the next one; from any thread. */
    void signal() {
        synchronized (wakeFdLock) {
            if (wakeFdClosed) return;
            writeEventFd();
        }
    }

    private void writeEventFd() {
        try {
            long unused = (long) LibC.WRITE.invokeExact(wakeFd, one, 8L);
        } catch (Throwable t) {
            throw Calls.unchecked(t);
        }
    }

    /** Resets the eventfd after a sleep (it is non-blocking: nothing to read is fine). */
    void drain() throws Throwable {
        long unused = (long) LibC.READ.invokeExact(wakeFd, eventValue, 8L);
    }

    /** Closes the eventfd and frees the memory; by the dispatcher thread, as it stops. */
    void close() {
        if (wakeFd >= 0) {
            synchronized (wakeFdLock) {
                wakeFdClosed = true;
                try {
                    int unused = (int) LibC.CLOSE.invokeExact(wakeFd);
                } catch (Throwable ignored) {
                    // nothing left to do with an fd that does not close
                }
            }
        }
        arena.close();
    }
}
