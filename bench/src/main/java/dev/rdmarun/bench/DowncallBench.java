package dev.rdmarun.bench;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.rdmarun.runtime.CompletionQueue;
import dev.rdmarun.runtime.Context;
import dev.rdmarun.runtime.DeviceList;
import dev.rdmarun.runtime.WcLayout;
import dev.rdmarun.runtime.WorkCompletions;
import dev.rdmarun.runtime.ibverbs.ffi.Structs;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * What one fast-path verbs call costs from Java, next to the physical limit: the same function
 * pointer called from a C loop. The function is poll_cq's: on a device ({@code -p target=rxe0}),
 * the provider's poll_cq (from {@code context->ops}, as verbs.h's static inline ibv_poll_cq
 * reads it) on an empty CQ; on a machine without RDMA ({@code target=host}), a C function of the
 * same signature that returns 0, built with the bench module (src/main/c/rrbench.c).
 *
 * <ul>
 *   <li>{@code cLoop}: C calls the pointer in a loop (rr_call_loop), per call.</li>
 *   <li>{@code downcall}: one Java downcall of the pointer, bound as the runtime binds its
 *       ops (ContextOps: the same descriptor, {@code Linker.Option.critical}).</li>
 *   <li>{@code runtimePoll} (device only): {@code CompletionQueue.poll(WorkCompletions)}, the
 *       runtime's public call that the dispatcher makes on every round.</li>
 * </ul>
 * Run by bench/jmh.sh; figures in BENCHMARKS.md.
 */
@State(Scope.Thread)
public class DowncallBench extends JmhDefaults {
    private static final int LOOP = 1000;
    private static final FunctionDescriptor POLL_CQ = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS);
    /** Bound to no address: the function pointer is its first argument, and the handle a constant the JIT inlines. */
    private static final MethodHandle POLL_ANY = Linker.nativeLinker().downcallHandle(POLL_CQ, Linker.Option.critical(false));

    /** "host" (the C stand-in) or an RDMA device name. */
    @Param("host")
    public String target;

    private Arena arena;
    private MethodHandle downcall;
    private MethodHandle cLoop;
    private MemorySegment fn;
    private MemorySegment cq = MemorySegment.NULL;
    private MemorySegment wc;
    private Context context;
    private CompletionQueue runtimeCq;
    private WorkCompletions completions;
    private RawCq raw;

    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        Path lib = Path.of(System.getProperty("rdmarun.bench.lib", "bench/target/native/librrbench.so"));
        SymbolLookup bench = SymbolLookup.libraryLookup(lib, arena);
        Linker linker = Linker.nativeLinker();
        cLoop = linker.downcallHandle(bench.find("rr_call_loop").orElseThrow(),
                FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_INT, ADDRESS, JAVA_LONG));
        wc = arena.allocate(WcLayout.SIZE * 16, 8);
        if (target.equals("host")) {
            fn = bench.find("rr_noop_poll").orElseThrow();
        } else {
            raw = new RawCq(target, arena);
            cq = raw.cq;
            fn = raw.pollCq;
            try (DeviceList devices = DeviceList.open()) {
                context = devices.find(target).open();
            }
            runtimeCq = context.createCompletionQueue(16);
            completions = new WorkCompletions(16);
        }
        downcall = linker.downcallHandle(fn, POLL_CQ, Linker.Option.critical(false));
        fnG = MemorySegment.ofAddress(fn.address());
        cqG = MemorySegment.ofAddress(cq.address());
        wcG = MemorySegment.ofAddress(wc.address()).reinterpret(wc.byteSize());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (completions != null) completions.close();
        if (runtimeCq != null) runtimeCq.close();
        if (context != null) context.close();
        if (raw != null) raw.close();
        arena.close();
    }

    @Benchmark
    @OperationsPerInvocation(LOOP)
    public long cLoop() throws Throwable {
        return (long) cLoop.invokeExact(fn, cq, 16, wc, (long) LOOP);
    }

    @Benchmark
    public int downcall() throws Throwable {
        return (int) downcall.invokeExact(cq, 16, wc);
    }

    @Benchmark
    public int downcallStatic() throws Throwable {
        return (int) POLL_ANY.invokeExact(fn, cq, 16, wc);
    }

    @Benchmark
    public int downcallGlobal() throws Throwable {
        return (int) POLL_ANY.invokeExact(fnG, cqG, 16, wcG);
    }

    private MemorySegment fnG, cqG, wcG;

    @Benchmark
    public int runtimePoll() {
        return runtimeCq == null ? 0 : runtimeCq.poll(completions);
    }

    /** A CQ of libibverbs' own, outside the runtime: its ibv_cq pointer and its provider's poll_cq. */
    static final class RawCq implements AutoCloseable {
        final MemorySegment cq;
        final MemorySegment pollCq;
        private final MemorySegment list;
        private final MemorySegment ctx;
        private final MethodHandle destroyCq;
        private final MethodHandle closeDevice;
        private final MethodHandle freeList;

        RawCq(String device, Arena arena) {
            Linker linker = Linker.nativeLinker();
            SymbolLookup ib = SymbolLookup.libraryLookup("libibverbs.so.1", arena);
            try {
                MethodHandle getList = linker.downcallHandle(ib.find("ibv_get_device_list").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS));
                MethodHandle name = linker.downcallHandle(ib.find("ibv_get_device_name").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS));
                MethodHandle open = linker.downcallHandle(ib.find("ibv_open_device").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS));
                MethodHandle create = linker.downcallHandle(ib.find("ibv_create_cq").orElseThrow(),
                        FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
                destroyCq = linker.downcallHandle(ib.find("ibv_destroy_cq").orElseThrow(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
                closeDevice = linker.downcallHandle(ib.find("ibv_close_device").orElseThrow(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
                freeList = linker.downcallHandle(ib.find("ibv_free_device_list").orElseThrow(), FunctionDescriptor.ofVoid(ADDRESS));
                list = ((MemorySegment) getList.invokeExact(MemorySegment.NULL)).reinterpret(8 * 64);
                MemorySegment dev = MemorySegment.NULL;
                for (int i = 0; i < 64; i++) {
                    MemorySegment d = list.getAtIndex(ADDRESS, i);
                    if (d.equals(MemorySegment.NULL)) break;
                    String n = ((MemorySegment) name.invokeExact(d)).reinterpret(256).getString(0);
                    if (n.equals(device)) dev = d;
                }
                if (dev.equals(MemorySegment.NULL)) throw new IllegalArgumentException("no RDMA device " + device);
                ctx = (MemorySegment) open.invokeExact(dev);
                cq = (MemorySegment) create.invokeExact(ctx, 16, MemorySegment.NULL, MemorySegment.NULL, 0);
                if (cq.equals(MemorySegment.NULL)) throw new IllegalStateException("ibv_create_cq failed on " + device);
                pollCq = ctx.reinterpret(Structs.IBV_CONTEXT.byteSize()).get(ADDRESS, Structs.CONTEXT_OPS_POLL_CQ);
            } catch (RuntimeException e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
        }

        @Override
        public void close() {
            try {
                int rc = (int) destroyCq.invokeExact(cq);
                rc |= (int) closeDevice.invokeExact(ctx);
                freeList.invokeExact(list);
                if (rc != 0) throw new IllegalStateException("ibv_destroy_cq or ibv_close_device failed");
            } catch (RuntimeException e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
        }
    }
}
