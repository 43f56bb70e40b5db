package dev.rdmarun.bench;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * What the DSL pays per completion to get back into the waiting code: a coroutine suspend and
 * resume on one thread ({@link ResumeLoop}, the way {@code QpDriver} parks and wakes), next to a
 * plain callback, which is what code without coroutines would pay. Run by bench/jmh.sh.
 */
@State(Scope.Thread)
public class ResumeBench extends JmhDefaults {
    private ResumeLoop loop;
    private long calls;
    private final Runnable callback = () -> calls++;

    @Setup
    public void setUp() {
        loop = new ResumeLoop();
    }

    @Benchmark
    public long coroutineResume() {
        return loop.completion();
    }

    @Benchmark
    public long callback() {
        callback.run();
        return calls;
    }
}
