package dev.rdmarun.runtime;

import java.util.ArrayDeque;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The dispatcher's task duty: tasks submitted with {@link PollingDispatcher#execute}, run between
 * polls. Apart from the dispatcher because it is the one part other threads write to: a lock-free
 * queue for them, a plain one for tasks the dispatcher thread queues itself.
 */
final class TaskQueue {
    private final ArrayDeque<Runnable> localTasks = new ArrayDeque<>();
    private final ConcurrentLinkedQueue<Runnable> remoteTasks = new ConcurrentLinkedQueue<>();

    /** From the dispatcher thread. */
    void addLocal(Runnable task) {
        localTasks.add(task);
    }

    /** From any other thread. */
    void addRemote(Runnable task) {
        remoteTasks.add(task);
    }

    boolean isEmpty() {
        return localTasks.isEmpty() && remoteTasks.isEmpty();
    }

    /** Runs the queued tasks; returns how many. */
    int run() {
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

    /** At shutdown: runs what the failures of pending work queue, a bounded number of rounds, then drops the rest. */
    void drain() {
        // Bounded: continuations resumed by the failures may queue a few more tasks, but never hang shutdown.
        for (int round = 0; round < 8 && !isEmpty(); round++) run();
        localTasks.clear();
        remoteTasks.clear();
    }

    private static void runTask(Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            reportUncaught(e);
        }
    }

    /** A task's or an agent's exception goes to the thread's handler; the loop goes on. */
    static void reportUncaught(RuntimeException e) {
        Thread t = Thread.currentThread();
        t.getUncaughtExceptionHandler().uncaughtException(t, e);
    }
}
