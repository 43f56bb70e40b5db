package dev.rdmarun.runtime.ibverbs.ffi;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.rdmarun.runtime.os.Errno;
import dev.rdmarun.runtime.os.Native;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * Exported libibverbs functions, bound once. Functions that report failure through errno take an
 * {@link Errno} segment as their first argument. The fast-path verbs are not here: they are
 * static inline in verbs.h and are bound per context through its ops table ({@link ContextOps}).
 */
public final class LibIbverbs {
    public static final String LIBRARY = "libibverbs.so.1";

    private static volatile LibIbverbs instance;
    private static volatile UnsatisfiedLinkError loadFailure;

    public final MethodHandle getDeviceList;      // ibv_device **(int *num)
    public final MethodHandle freeDeviceList;     // void (ibv_device **)
    public final MethodHandle getDeviceName;      // const char *(ibv_device *)
    public final MethodHandle getDeviceGuid;      // __be64 (ibv_device *)
    public final MethodHandle openDevice;         // ibv_context *(ibv_device *)
    public final MethodHandle closeDevice;        // int (ibv_context *)
    public final MethodHandle queryDevice;        // int (ibv_context *, ibv_device_attr *)
    public final MethodHandle queryPortCompat;    // int (ibv_context *, uint8_t, _compat_ibv_port_attr *)
    public final MethodHandle queryGidTable;      // ssize_t (ibv_context *, ibv_gid_entry *, size_t, uint32_t, size_t)
    public final MethodHandle allocPd;            // ibv_pd *(ibv_context *)
    public final MethodHandle deallocPd;          // int (ibv_pd *)
    public final MethodHandle regMr;              // ibv_mr *(ibv_pd *, void *, size_t, int)
    public final MethodHandle deregMr;            // int (ibv_mr *)
    public final MethodHandle createCompChannel;  // ibv_comp_channel *(ibv_context *)
    public final MethodHandle destroyCompChannel; // int (ibv_comp_channel *)
    public final MethodHandle createCq;           // ibv_cq *(ibv_context *, int, void *, ibv_comp_channel *, int)
    public final MethodHandle destroyCq;          // int (ibv_cq *)
    public final MethodHandle getCqEvent;         // int (ibv_comp_channel *, ibv_cq **, void **)
    public final MethodHandle ackCqEvents;        // void (ibv_cq *, unsigned)
    public final MethodHandle createQp;           // ibv_qp *(ibv_pd *, ibv_qp_init_attr *)
    public final MethodHandle modifyQp;           // int (ibv_qp *, ibv_qp_attr *, int)
    public final MethodHandle queryQp;            // int (ibv_qp *, ibv_qp_attr *, int, ibv_qp_init_attr *)
    public final MethodHandle destroyQp;          // int (ibv_qp *)
    public final MethodHandle wcStatusStr;        // const char *(enum ibv_wc_status)

    private LibIbverbs(SymbolLookup lib) {
        getDeviceList = Native.bindWithErrno(lib, "ibv_get_device_list", FunctionDescriptor.of(ADDRESS, ADDRESS));
        freeDeviceList = Native.bind(lib, "ibv_free_device_list", FunctionDescriptor.ofVoid(ADDRESS));
        getDeviceName = Native.bind(lib, "ibv_get_device_name", FunctionDescriptor.of(ADDRESS, ADDRESS));
        getDeviceGuid = Native.bind(lib, "ibv_get_device_guid", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        openDevice = Native.bindWithErrno(lib, "ibv_open_device", FunctionDescriptor.of(ADDRESS, ADDRESS));
        closeDevice = Native.bindWithErrno(lib, "ibv_close_device", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        queryDevice = Native.bindWithErrno(lib, "ibv_query_device",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        queryPortCompat = Native.bindWithErrno(lib, "ibv_query_port",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS));
        queryGidTable = Native.bindWithErrno(lib, "_ibv_query_gid_table",
                FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_LONG));
        allocPd = Native.bindWithErrno(lib, "ibv_alloc_pd", FunctionDescriptor.of(ADDRESS, ADDRESS));
        deallocPd = Native.bindWithErrno(lib, "ibv_dealloc_pd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        regMr = Native.bindWithErrno(lib, "ibv_reg_mr",
                FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        deregMr = Native.bindWithErrno(lib, "ibv_dereg_mr", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        createCompChannel = Native.bindWithErrno(lib, "ibv_create_comp_channel",
                FunctionDescriptor.of(ADDRESS, ADDRESS));
        destroyCompChannel = Native.bindWithErrno(lib, "ibv_destroy_comp_channel",
                FunctionDescriptor.of(JAVA_INT, ADDRESS));
        createCq = Native.bindWithErrno(lib, "ibv_create_cq",
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        destroyCq = Native.bindWithErrno(lib, "ibv_destroy_cq", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        getCqEvent = Native.bindWithErrno(lib, "ibv_get_cq_event",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        ackCqEvents = Native.bind(lib, "ibv_ack_cq_events", FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT));
        createQp = Native.bindWithErrno(lib, "ibv_create_qp", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
        modifyQp = Native.bindWithErrno(lib, "ibv_modify_qp",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        queryQp = Native.bindWithErrno(lib, "ibv_query_qp",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, ADDRESS));
        destroyQp = Native.bindWithErrno(lib, "ibv_destroy_qp", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        wcStatusStr = Native.bind(lib, "ibv_wc_status_str", FunctionDescriptor.of(ADDRESS, JAVA_INT));
    }

    /**
     * The bound library. Throws {@link UnsatisfiedLinkError} with the packages to install when
     * libibverbs.so.1 is not on this machine; the failure is remembered, not retried.
     */
    public static LibIbverbs get() {
        LibIbverbs lib = instance;
        if (lib != null) return lib;
        synchronized (LibIbverbs.class) {
            if (instance != null) return instance;
            if (loadFailure != null) throw loadFailure;
            try {
                instance = new LibIbverbs(SymbolLookup.libraryLookup(LIBRARY, Arena.global()));
                return instance;
            } catch (IllegalArgumentException e) {
                loadFailure = new UnsatisfiedLinkError(LIBRARY + " is not installed: install the packages"
                        + " libibverbs1 and ibverbs-providers (Debian/Ubuntu: apt-get install libibverbs1"
                        + " ibverbs-providers rdma-core)");
                throw loadFailure;
            }
        }
    }

    /** Text of ibv_wc_status_str(status). */
    public String wcStatusString(int status) {
        try {
            return Native.string((MemorySegment) wcStatusStr.invokeExact(status));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public static String string(MemorySegment address) {
        return Native.string(address);
    }
}
