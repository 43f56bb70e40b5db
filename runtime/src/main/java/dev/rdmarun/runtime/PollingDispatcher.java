package dev.rdmarun.runtime;

import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.locks.LockSupport;

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
 *
 * <p>Inside, it is a runner in Agrona's shape, though not Agrona's {@code AgentRunner} (EVENT mode
 * must be woken through an eventfd): each round runs its duties, the task queue, the CQ poller and
 * the {@link Agent}s, and hands the work they did to one idle strategy ({@link IdleMode}), which
 * {@link #relax} swaps.
 */
public final class PollingDispatcher implements Executor, AutoCloseable {
    private static final long JOIN_TIMEOUT_MS = 10_000;

    /**
     * Work the dispatcher thread does on every round besides polling: conditions that change
     * without a completion (a credit word the peer writes) and deadlines. Like Agrona's
     * {@code Agent} in its {@code doWork}, but with no start, close or role name, and with a say in
     * how long an EVENT-mode dispatcher sleeps.
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
    private final Thread thread;
    private final CompletionPoller poller = new CompletionPoller();
    private final TaskQueue tasks = new TaskQueue();
    private final AgentList agents = new AgentList();
    private final PollSleeper sleeper;
    private final EventIdler eventIdler;
    /** Read by {@link #execute} on any thread to wake the loop the way it waits. */
    private volatile Idler idler;
    /** {@link #relax}: a BUSY_SPIN dispatcher backs off when idle and is unparked by {@link #execute}. */
    private boolean relaxed;
    private volatile boolean running = true;
    private volatile Throwable failure;

    private PollingDispatcher(String name, IdleMode mode, CompletionChannel channel) {
        this.mode = mode;
        // Always: the mode can become EVENT later (setIdleMode).
        this.sleeper = new PollSleeper();
        this.eventIdler = new EventIdler(this, poller, tasks, agents, sleeper);
        eventIdler.useChannel(channel);
        this.thread = Thread.ofPlatform().name(name).daemon(true).unstarted(this::loop);
        this.idler = idlerFor(mode);
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

    private Idler idlerFor(IdleMode mode) {
        return switch (mode) {
            case BUSY_SPIN -> AgronaIdler.busySpin(thread);
            case BACKOFF -> AgronaIdler.backoff(thread);
            case EVENT -> eventIdler;
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
        if (poller.hasCompletionQueues()) throw new IllegalStateException("set the idle mode before adding completion queues");
        eventIdler.useChannel(channel);
        this.idler = idlerFor(mode);
        this.mode = mode;
        this.relaxed = false;
    }

    public boolean isDispatcherThread() {
        return Thread.currentThread() == thread;
    }

    public void setUnmatchedCompletionHandler(UnmatchedCompletionHandler handler) {
        poller.setUnmatchedCompletionHandler(handler);
    }

    /** Polls this CQ from now on. Dispatcher thread only. */
    public void addCompletionQueue(CompletionQueue cq) {
        checkThread();
        if (mode == IdleMode.EVENT && cq.channel() != eventIdler.channel()) {
            throw new IllegalArgumentException("in EVENT mode every CQ must use the dispatcher's completion channel");
        }
        poller.add(cq);
    }

    /** Runs this agent on every round from now on. Dispatcher thread only. */
    public void addAgent(Agent agent) {
        checkThread();
        agents.add(agent);
    }

    /** Stops running this agent. Dispatcher thread only. */
    public void removeAgent(Agent agent) {
        checkThread();
        agents.remove(agent);
    }

    /** Stops polling this CQ. Dispatcher thread only. */
    public void removeCompletionQueue(CompletionQueue cq) {
        checkThread();
        poller.remove(cq);
    }

    /**
     * Registers an operation and returns the wr_id to post it with. Dispatcher thread only;
     * allocation-free once the slot table has grown to the in-flight maximum.
     */
    public long register(PendingOperation op) {
        checkThread();
        return poller.register(op);
    }

    /** Forgets an operation whose post failed (it will get no completion). Dispatcher thread only. */
    public void unregister(long wrId) {
        checkThread();
        poller.unregister(wrId);
    }

    /** Operations posted and not yet completed. */
    public int pending() {
        checkThread();
        return poller.pending();
    }

    /** Runs the task on the dispatcher thread, after the current poll. */
    @Override
    public void execute(Runnable task) {
        if (!running) throw new RejectedExecutionException("dispatcher " + thread.getName() + " is closed");
        if (isDispatcherThread()) {
            tasks.addLocal(task);
            return;
        }
        tasks.addRemote(task);
        idler.wake();
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
        idler = AgronaIdler.backoff(thread);
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
        idler = idlerFor(mode);
        relaxed = false;
    }

    private void checkThread() {
        if (!isDispatcherThread()) {
            throw new IllegalStateException("call this on the dispatcher thread (submit it with execute())");
        }
    }

    /** The loop still runs (the event idler checks it before it sleeps). */
    boolean isRunning() {
        return running;
    }

    /** The runner: each round runs the duties, then idles the current way. */
    private void loop() {
        try {
            sleeper.warmUp();
            while (running) {
                int work = tasks.run() + poller.poll() + agents.run();
                idler.idle(work);
            }
        } catch (Throwable t) {
            failure = t;
        } finally {
            running = false;
            shutdown();
        }
    }

    /** Fails what is still pending, lets the tasks that wake up see it, then frees the thread's memory. */
    private void shutdown() {
        Throwable cause = failure != null ? failure
                : new VerbsException("the dispatcher " + thread.getName() + " shut down with work outstanding",
                        "the scenario ended (cancelled or failed) before these operations completed");
        poller.failAll(cause);
        tasks.drain();
        poller.close();
        sleeper.close();
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
            sleeper.signal();
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
