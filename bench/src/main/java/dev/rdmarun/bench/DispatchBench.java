package dev.rdmarun.bench;

import dev.rdmarun.runtime.IdleMode;
import dev.rdmarun.runtime.PollingDispatcher;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The dispatcher's hand-off: a task submitted from another thread ({@code execute}) until it has
 * run on the dispatcher thread, round trip, with the dispatcher idle in the given mode. This is
 * what a JVM application pays to get work onto the thread that polls its CQs (the DSL's own
 * coroutines run there and do not pay it). Run by bench/jmh.sh; figures in BENCHMARKS.md.
 */
@State(Scope.Thread)
public class DispatchBench extends JmhDefaults {
    @Param({"BUSY_SPIN", "BACKOFF"})
    public IdleMode mode;

    private PollingDispatcher dispatcher;
    private volatile long ran;
    private long submitted;
    private final Runnable task = () -> ran++;

    @Setup(Level.Trial)
    public void setUp() {
        dispatcher = PollingDispatcher.start("bench-dispatcher", mode, null);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        dispatcher.close();
    }

    @Benchmark
    public long handOff() {
        long target = ++submitted;
        dispatcher.execute(task);
        while (ran != target) Thread.onSpinWait();
        return target;
    }
}
