package dev.rdmarun.runtime;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import dev.rdmarun.runtime.os.Calls;
import dev.rdmarun.runtime.os.Errno;
import dev.rdmarun.runtime.os.LibC;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * One platform thread that owns a set of CQs: it polls them in batches, completes the
 * {@link PendingOperation} named by each wr_id, and runs tasks submitted to it between polls,
 * which makes it an {@link Executor} that coroutines can run on (post and poll on one thread,
 * no locks on the data path).
 *
 * <p>Thread rules: {@link #register}, {@link #addCompletionQueue} and the post methods of QPs whose
 * CQs this dispatcher polls are for the dispatcher thread (run them through {@link #execute});
 * {@link #execute} and {@link #close} are for any thread. Close the dispatcher before the verbs
 * objects it polls.
 */
public final class PollingDispatcher implements Executor, AutoCloseable {
    private static final int BATCH = 32;
    /** In EVENT mode, empty polls before the CQs are armed and the thread sleeps. */
    private static final int SPINS_BEFORE_SLEEP = 64;
    private static final long JOIN_TIMEOUT_MS = 10_000;

    /**
     * Work the dispatcher thread does on every round besides polling: conditions that change
     * without a completion (a credit word the peer writes) and deadlines. Agrona's Agent, in short.
     */
    public interface Agent {
        /** Runs once per round on the dispatcher thread; returns how much work it did (0: none). */
        int doWork();

        /**
         * The longest an EVENT-mode dispatcher may sleep before calling {@link #doWork} again, in
         * milliseconds; negative: until the next completion or task.
         */
        default long maxSleepMillis() {
            return -1;
        }
    }

    /** What to do with a completion whose wr_id names no pending operation. */
    public interface UnmatchedCompletionHandler {
        void onUnmatched(WorkCompletions completions, int index);
    }

    private volatile IdleMode mode;
    private CompletionChannel channel;
    private final Thread thread;
    private final CompletionSlots slots = new CompletionSlots(256);
    private final WorkCompletions completions = new WorkCompletions(BATCH);
    private final List<CompletionQueue> cqs = new ArrayList<>();
    private final List<Agent> agents = new ArrayList<>();
    private final ArrayDeque<Runnable> localTasks = new ArrayDeque<>();
    private final ConcurrentLinkedQueue<Runnable> remoteTasks = new ConcurrentLinkedQueue<>();
    private IdleStrategy idle;
    /** {@link #relax}: a BUSY_SPIN dispatcher backs off when idle and is unparked by {@link #execute}. */
    private volatile boolean relaxed;
    private volatile UnmatchedCompletionHandler unmatched = (c, i) -> { };
    private volatile boolean running = true;
    private volatile boolean sleeping;
    private volatile Throwable failure;
    /** Some dispatcher thread of this JVM has run {@link #warmUpSleepPath}. */
    private static volatile boolean sleepPathWarm;

    // EVENT mode: poll(2) on [channel fd, wake-up eventfd]
    private final Arena arena = Arena.ofShared();
    private final MemorySegment pollFds;
    private final MemorySegment eventValue;
    /** The 1 written to the wake-up eventfd (under wakeFdLock). */
    private final MemorySegment one;
    private final Errno errno;
    private final int wakeFd;

    private PollingDispatcher(String name, IdleMode mode, CompletionChannel channel) {
        this.mode = mode;
        this.channel = channel;
        this.idle = idleStrategy(mode);
        this.pollFds = arena.allocate(LibC.POLLFD, 2);
        this.eventValue = arena.allocate(JAVA_LONG);
        this.one = arena.allocate(JAVA_LONG);
        one.set(JAVA_LONG, 0, 1L);
        this.errno = new Errno(arena);
        // Always: the mode can become EVENT later (setIdleMode).
        this.wakeFd = createEventFd();
        this.thread = Thread.ofPlatform().name(name).daemon(true).unstarted(this::loop);
    }

    /**
     * Starts a dispatcher. EVENT mode sleeps on {@code channel} (every CQ it polls must use that
     * channel); the channel may be null for a dispatcher that only runs tasks.
     */
    public static PollingDispatcher start(String name, IdleMode mode, CompletionChannel channel) {
        PollingDispatcher d = new PollingDispatcher(name, mode, channel);
        d.thread.start();
        return d;
    }

    private static IdleStrategy idleStrategy(IdleMode mode) {
        return switch (mode) {
            case BUSY_SPIN, EVENT -> new BusySpinIdleStrategy();
            case BACKOFF -> new BackoffIdleStrategy(100, 10, TimeUnit.MICROSECONDS.toNanos(1),
                    TimeUnit.MILLISECONDS.toNanos(1));
        };
    }

    public IdleMode mode() {
        return mode;
    }

    /**
     * Changes the idle mode (and EVENT mode's channel) while no CQ is polled yet: a scenario's
     * thread starts before its settings, and so its mode, are known. Dispatcher thread only.
     */
    public void setIdleMode(IdleMode mode, CompletionChannel channel) {
        checkThread();
        if (!cqs.isEmpty()) throw new IllegalStateException("set the idle mode before adding completion queues");
        this.channel = channel;
        this.idle = idleStrategy(mode);
        this.mode = mode;
        this.relaxed = false;
    }

    public boolean isDispatcherThread() {
        return Thread.currentThread() == thread;
    }

    public void setUnmatchedCompletionHandler(UnmatchedCompletionHandler handler) {
        this.unmatched = handler;
    }

    /** Polls this CQ from now on. Dispatcher thread only. */
    public void addCompletionQueue(CompletionQueue cq) {
        checkThread();
        if (mode == IdleMode.EVENT && cq.channel() != channel) {
            throw new IllegalArgumentException("in EVENT mode every CQ must use the dispatcher's completion channel");
        }
        if (!cqs.contains(cq)) cqs.add(cq);
    }

    /** Runs this agent on every round from now on. Dispatcher thread only. */
    public void addAgent(Agent agent) {
        checkThread();
        if (!agents.contains(agent)) agents.add(agent);
    }

    /** Stops running this agent. Dispatcher thread only. */
    public void removeAgent(Agent agent) {
        checkThread();
        agents.remove(agent);
    }

    /** Stops polling this CQ. Dispatcher thread only. */
    public void removeCompletionQueue(CompletionQueue cq) {
        checkThread();
        cqs.remove(cq);
    }

    /**
     * Registers an operation and returns the wr_id to post it with. Dispatcher thread only;
     * allocation-free once the slot table has grown to the in-flight maximum.
     */
    public long register(PendingOperation op) {
        checkThread();
        return slots.acquire(op);
    }

    /** Forgets an operation whose post failed (it will get no completion). Dispatcher thread only. */
    public void unregister(long wrId) {
        checkThread();
        slots.release(wrId);
    }

    /** Operations posted and not yet completed. */
    public int pending() {
        checkThread();
        return slots.size();
    }

    /** Runs the task on the dispatcher thread, after the current poll. */
    @Override
    public void execute(Runnable task) {
        if (!running) throw new RejectedExecutionException("dispatcher " + thread.getName() + " is closed");
        if (isDispatcherThread()) {
            localTasks.add(task);
            return;
        }
        remoteTasks.add(task);
        wake();
    }

    private void wake() {
        if (mode == IdleMode.EVENT) {
            if (sleeping) signalEventFd();
        } else if (mode == IdleMode.BACKOFF || relaxed) {
            LockSupport.unpark(thread);
        }
    }

    /**
     * From now on (until {@link #resumeSpinning}) a BUSY_SPIN dispatcher stops spinning when it finds no work: it spins a little,
     * yields, then parks for up to 1 ms (any other mode is unchanged). For a side that only waits
     * for its peer: a core spinning for nothing is a core taken from the peer and, on a small VM,
     * from rxe's own work in the kernel. Completions and tasks are still taken, the latter at once.
     * Dispatcher thread only.
     */
    public void relax() {
        checkThread();
        if (mode != IdleMode.BUSY_SPIN || relaxed) return;
        idle = idleStrategy(IdleMode.BACKOFF);
        relaxed = true;
    }

    /**
     * Undoes {@link #relax}: a BUSY_SPIN dispatcher spins again when idle (a session relaxes it
     * while it waits for its peer to connect, then spins while the scenario runs). Dispatcher
     * thread only.
     */
    public void resumeSpinning() {
        checkThread();
        if (!relaxed) return;
        idle = idleStrategy(mode);
        relaxed = false;
    }

    private void checkThread() {
        if (!isDispatcherThread()) {
            throw new IllegalStateException("call this on the dispatcher thread (submit it with execute())");
        }
    }

    private void loop() {
        int emptyPolls = 0;
        try {
            warmUpSleepPath();
            while (running) {
                int work = runTasks() + pollAll() + runAgents();
                if (work > 0) {
                    emptyPolls = 0;
                    idle.reset();
                } else if (mode == IdleMode.EVENT) {
                    if (++emptyPolls >= SPINS_BEFORE_SLEEP) {
                        sleepUntilEvent();
                        emptyPolls = 0;
                    } else {
                        Thread.onSpinWait();
                    }
                } else {
                    idle.idle();
                }
            }
        } catch (Throwable t) {
            failure = t;
        } finally {
            running = false;
            shutdown();
        }
    }

    private int runTasks() {
        int n = 0;
        Runnable task;
        // Only the tasks queued before this round: a task that re-queues itself cannot starve polling.
        for (int i = localTasks.size(); i > 0 && (task = localTasks.poll()) != null; i--) {
            runTask(task);
            n++;
        }
        while ((task = remoteTasks.poll()) != null) {
            runTask(task);
            n++;
        }
        return n;
    }

    private int runAgents() {
        int n = 0;
        for (int i = 0; i < agents.size(); i++) {
            try {
                n += agents.get(i).doWork();
            } catch (RuntimeException e) {
                Thread t = Thread.currentThread();
                t.getUncaughtExceptionHandler().uncaughtException(t, e);
            }
        }
        return n;
    }

    /** The shortest sleep any agent asks for, in ms; -1: none asks. */
    private int agentSleepMillis() {
        long min = -1;
        for (int i = 0; i < agents.size(); i++) {
            long m = agents.get(i).maxSleepMillis();
            if (m >= 0 && (min < 0 || m < min)) min = m;
        }
        return (int) Math.min(min, Integer.MAX_VALUE);
    }

    private static void runTask(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            Thread t = Thread.currentThread();
            t.getUncaughtExceptionHandler().uncaughtException(t, e);
        }
    }

    private int pollAll() {
        int total = 0;
        for (int c = 0; c < cqs.size(); c++) {
            CompletionQueue cq = cqs.get(c);
            int n;
            while ((n = cq.poll(completions)) > 0) {
                for (int i = 0; i < n; i++) {
                    PendingOperation op = slots.release(completions.wrId(i));
                    if (op != null) op.complete(completions, i);
                    else unmatched.onUnmatched(completions, i);
                }
                total += n;
                if (n < completions.capacity()) break;
            }
        }
        return total;
    }

    /**
     * Arms every CQ, polls once more (a completion that arrived before arming raises no event),
     * then sleeps in poll(2) on the channel and the wake-up fd.
     */
    private void sleepUntilEvent() throws Throwable {
        if (channel != null) {
            for (int c = 0; c < cqs.size(); c++) cqs.get(c).requestNotify(false);
            if (pollAll() > 0) return;
        }
        sleeping = true;
        try {
            if (!localTasks.isEmpty() || !remoteTasks.isEmpty() || !running) return;
            int nfds = 0;
            if (channel != null) setPollFd(nfds++, channel.fd());
            setPollFd(nfds++, wakeFd);
            // A failed poll (EINTR: a signal) is a wake-up like any other: the loop polls the CQs again.
            waitForEvents(nfds, agentSleepMillis());
        } finally {
            sleeping = false;
        }
        drainEventFd();
        if (channel != null) {
            CompletionQueue cq;
            while ((cq = channel.nextEvent()) != null) {
                // counted on the CQ; acknowledged below in one call per CQ
            }
            for (int c = 0; c < cqs.size(); c++) cqs.get(c).acknowledgeEvents();
        }
    }

    /**
     * Runs the sleep path's native calls with a zero timeout before any work, once per JVM: linking
     * their call sites (~140 KB) and the JDK customizing a method handle at its 128th call from
     * uncompiled code (~30 KB each) would otherwise allocate on the data path at whichever sleep
     * first gets there.
     */
    private void warmUpSleepPath() throws Throwable {
        if (sleepPathWarm) return;
        for (int i = 0; i < 128; i++) {
            setPollFd(0, wakeFd);
            waitForEvents(1, 0);
            drainEventFd();
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

    /** Guarded by itself: a wake-up must never write to the eventfd's number after it is closed and reused. */
    private final Object wakeFdLock = new Object();
    private boolean wakeFdClosed;

    private void signalEventFd() {
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

    private void drainEventFd() throws Throwable {
        long unused = (long) LibC.READ.invokeExact(wakeFd, eventValue, 8L);
    }

    /** Fails what is still pending, lets the tasks that wake up see it, then frees the thread's memory. */
    private void shutdown() {
        Throwable cause = failure != null ? failure
                : new VerbsException("the dispatcher " + thread.getName() + " shut down with work outstanding",
                        "the scenario ended (cancelled or failed) before these operations completed");
        slots.failAll(cause);
        // Bounded: continuations resumed by the failures may queue a few more tasks, but never hang shutdown.
        for (int round = 0; round < 8 && (!localTasks.isEmpty() || !remoteTasks.isEmpty()); round++) runTasks();
        localTasks.clear();
        remoteTasks.clear();
        completions.close();
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

    /** Why the loop stopped by itself, or null while running or after a normal close. */
    public Throwable failure() {
        return failure;
    }

    /**
     * Stops the thread and waits for it: pending operations fail with an exception, the thread's
     * memory is freed. Idempotent; never waits more than a few seconds.
     */
    @Override
    public void close() {
        running = false;
        if (isDispatcherThread()) return; // the loop ends after this task
        if (mode == IdleMode.EVENT) {
            signalEventFd();
        } else {
            LockSupport.unpark(thread);
        }
        try {
            thread.join(JOIN_TIMEOUT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            throw new IllegalStateException("dispatcher " + thread.getName() + " did not stop within "
                    + JOIN_TIMEOUT_MS + " ms (a task is blocking it)");
        }
    }
}
