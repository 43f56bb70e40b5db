package dev.rdmarun.runtime;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * BUSY_SPIN and BACKOFF: an Agrona {@link IdleStrategy}, used as Agrona means it. Apart from
 * {@link EventIdler} because these never sleep in the kernel: a backoff that parks is woken with
 * an unpark, a spin needs no wake-up at all.
 */
final class AgronaIdler implements Idler {
    private final IdleStrategy strategy;
    private final Thread thread;
    private final boolean parks;

    private AgronaIdler(IdleStrategy strategy, Thread thread, boolean parks) {
        this.strategy = strategy;
        this.thread = thread;
        this.parks = parks;
    }

    /** Spins (Agrona {@code BusySpinIdleStrategy}). */
    static AgronaIdler busySpin(Thread thread) {
        return new AgronaIdler(new BusySpinIdleStrategy(), thread, false);
    }

    /** Spins 100 times, yields 10 times, then parks 1 µs growing to 1 ms (Agrona {@code BackoffIdleStrategy}). */
    static AgronaIdler backoff(Thread thread) {
        return new AgronaIdler(new BackoffIdleStrategy(100, 10, TimeUnit.MICROSECONDS.toNanos(1),
                TimeUnit.MILLISECONDS.toNanos(1)), thread, true);
    }

    @Override
    public void idle(int work) {
        strategy.idle(work);
    }

    @Override
    public void wake() {
        if (parks) LockSupport.unpark(thread);
    }
}
