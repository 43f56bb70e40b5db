package dev.rdmarun.runtime.os;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;

/** The few libc calls the runtime needs: errno text, interface names, and fd waiting for event mode. */
public final class LibC {
    public static final int O_NONBLOCK = 04000;
    public static final int F_GETFL = 3;
    public static final int F_SETFL = 4;
    public static final int EFD_NONBLOCK = 04000;
    public static final int EFD_CLOEXEC = 02000000;
    public static final short POLLIN = 1;

    public static final StructLayout POLLFD = CStruct.of("pollfd",
            JAVA_INT.withName("fd"), JAVA_SHORT.withName("events"), JAVA_SHORT.withName("revents"));
    public static final long POLLFD_FD = CStruct.offset(POLLFD, "fd");
    public static final long POLLFD_EVENTS = CStruct.offset(POLLFD, "events");
    public static final long POLLFD_REVENTS = CStruct.offset(POLLFD, "revents");

    private static final MethodHandle STRERROR;
    private static final MethodHandle IF_INDEXTONAME;
    /*
     * poll, read and write are on the data path of event-mode dispatching (eventfd wake-ups) and
     * their callers need no errno, so they are bound without errno capture: capturing costs a
     * small allocation per call until the JIT removes it.
     */
    public static final MethodHandle POLL;     // int (struct pollfd *, nfds_t, int timeout)
    public static final MethodHandle EVENTFD;  // int (unsigned, int), errno
    public static final MethodHandle READ;     // ssize_t (int, void *, size_t)
    public static final MethodHandle WRITE;    // ssize_t (int, const void *, size_t)
    public static final MethodHandle CLOSE;    // int (int)
    public static final MethodHandle FCNTL;    // int (int, int, int), errno

    static {
        var libc = Native.LINKER.defaultLookup();
        STRERROR = Native.bind(libc, "strerror", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        IF_INDEXTONAME = Native.bind(libc, "if_indextoname", FunctionDescriptor.of(ADDRESS, JAVA_INT, ADDRESS));
        POLL = Native.bind(libc, "poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
        EVENTFD = Native.bindWithErrno(libc, "eventfd", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
        READ = Native.bind(libc, "read", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
        WRITE = Native.bind(libc, "write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
        CLOSE = Native.bind(libc, "close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        FCNTL = Native.bindWithErrno(libc, "fcntl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    }

    private LibC() {}

    public static String strerror(int errno) {
        try {
            return Native.string((MemorySegment) STRERROR.invokeExact(errno));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Name of the network interface with this index, or null when there is none. */
    public static String interfaceName(int ifindex) {
        if (ifindex <= 0) return null;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(MemoryLayout.sequenceLayout(16, java.lang.foreign.ValueLayout.JAVA_BYTE));
            MemorySegment r = (MemorySegment) IF_INDEXTONAME.invokeExact(ifindex, buf);
            return r.equals(MemorySegment.NULL) ? null : buf.getString(0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Sets O_NONBLOCK on fd; returns 0 or -errno. */
    public static int setNonBlocking(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            Errno errno = new Errno(arena);
            int flags = (int) FCNTL.invokeExact(errno.segment(), fd, F_GETFL, 0);
            if (flags < 0) return -errno.value();
            int rc = (int) FCNTL.invokeExact(errno.segment(), fd, F_SETFL, flags | O_NONBLOCK);
            return rc < 0 ? -errno.value() : 0;
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
