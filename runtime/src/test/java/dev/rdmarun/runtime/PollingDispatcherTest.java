package dev.rdmarun.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Dispatcher behaviour that needs no device: tasks, thread confinement, shutdown. */
class PollingDispatcherTest {

    @ParameterizedTest
    @EnumSource(IdleMode.class)
    void runsSubmittedTasksOnItsOwnThreadInOrder(IdleMode mode) throws Exception {
        try (PollingDispatcher d = PollingDispatcher.start("test-" + mode, mode, null)) {
            List<Integer> seen = new ArrayList<>();
            CompletableFuture<Boolean> onThread = new CompletableFuture<>();
            for (int i = 0; i < 100; i++) {
                int n = i;
                d.execute(() -> seen.add(n));
            }
            d.execute(() -> onThread.complete(d.isDispatcherThread()));
            assertTrue(onThread.get(10, TimeUnit.SECONDS));
            List<Integer> expected = new ArrayList<>();
            for (int i = 0; i < 100; i++) expected.add(i);
            CompletableFuture<List<Integer>> snapshot = new CompletableFuture<>();
            d.execute(() -> snapshot.complete(List.copyOf(seen)));
            assertEquals(expected, snapshot.get(10, TimeUnit.SECONDS));
        }
    }

    @ParameterizedTest
    @EnumSource(IdleMode.class)
    void wakesUpForTasksSubmittedWhileIdle(IdleMode mode) throws Exception {
        try (PollingDispatcher d = PollingDispatcher.start("idle-" + mode, mode, null)) {
            // Many separate submissions: each may find the thread asleep (EVENT) or parked (BACKOFF).
            for (int i = 0; i < 200; i++) {
                CountDownLatch ran = new CountDownLatch(1);
                d.execute(ran::countDown);
                assertTrue(ran.await(10, TimeUnit.SECONDS), "task " + i + " was not run");
            }
        }
    }

    @org.junit.jupiter.api.Test
    void aRelaxedBusyDispatcherParksWhenIdleStillRunsEveryTaskAndSpinsAgainWhenResumed() throws Exception {
        try (PollingDispatcher d = PollingDispatcher.start("relaxed", IdleMode.BUSY_SPIN, null)) {
            assertThrows(IllegalStateException.class, d::relax, "relax() is for the dispatcher thread");
            CompletableFuture<Thread> thread = new CompletableFuture<>();
            d.execute(() -> {
                d.relax();
                thread.complete(Thread.currentThread());
            });
            Thread t = thread.get(10, TimeUnit.SECONDS);
            // Idle, it ends up parked (a spinning thread is always RUNNABLE): looked at until a deadline.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            boolean parked = false;
            while (!parked && System.nanoTime() < deadline) parked = t.getState() == Thread.State.TIMED_WAITING;
            assertTrue(parked, "an idle relaxed dispatcher parks");
            for (int i = 0; i < 200; i++) {
                CountDownLatch ran = new CountDownLatch(1);
                d.execute(ran::countDown);
                assertTrue(ran.await(10, TimeUnit.SECONDS), "task " + i + " was not run");
            }
            // Spinning again, it never parks: every look finds it RUNNABLE.
            assertThrows(IllegalStateException.class, d::resumeSpinning, "resumeSpinning() is for the dispatcher thread");
            CountDownLatch resumed = new CountDownLatch(1);
            d.execute(() -> {
                d.resumeSpinning();
                resumed.countDown();
            });
            assertTrue(resumed.await(10, TimeUnit.SECONDS), "resumeSpinning() did not run");
            for (int i = 0; i < 20_000; i++) {
                assertEquals(Thread.State.RUNNABLE, t.getState(), "a dispatcher spinning again parked");
            }
        }
    }

    @ParameterizedTest
    @EnumSource(IdleMode.class)
    void closeFailsPendingOperationsAndRejectsNewTasks(IdleMode mode) throws Exception {
        PollingDispatcher d = PollingDispatcher.start("close-" + mode, mode, null);
        CompletableFuture<Throwable> failed = new CompletableFuture<>();
        CompletableFuture<Integer> pending = new CompletableFuture<>();
        d.execute(() -> {
            d.register(new PendingOperation() {
                @Override
                public void complete(WorkCompletions completions, int index) {
                    failed.completeExceptionally(new AssertionError("no completion can arrive"));
                }

                @Override
                public void fail(Throwable cause) {
                    failed.complete(cause);
                }
            });
            pending.complete(d.pending());
        });
        assertEquals(1, pending.get(10, TimeUnit.SECONDS));
        d.close();
        assertInstanceOf(VerbsException.class, failed.get(10, TimeUnit.SECONDS));
        assertThrows(RejectedExecutionException.class, () -> d.execute(() -> { }));
        d.close(); // idempotent
    }

    @ParameterizedTest
    @EnumSource(IdleMode.class)
    void registeringOffTheDispatcherThreadIsRefused(IdleMode mode) {
        try (PollingDispatcher d = PollingDispatcher.start("confine-" + mode, mode, null)) {
            assertThrows(IllegalStateException.class, () -> d.register(new CompletionSlotsTest.Op()));
        }
    }

    @ParameterizedTest
    @EnumSource(IdleMode.class)
    void aFailingTaskDoesNotStopTheDispatcher(IdleMode mode) throws Exception {
        try (PollingDispatcher d = PollingDispatcher.start("robust-" + mode, mode, null)) {
            Thread.UncaughtExceptionHandler quiet = (t, e) -> { };
            CompletableFuture<Void> installed = new CompletableFuture<>();
            d.execute(() -> {
                Thread.currentThread().setUncaughtExceptionHandler(quiet);
                installed.complete(null);
            });
            installed.get(10, TimeUnit.SECONDS);
            d.execute(() -> {
                throw new IllegalStateException("boom");
            });
            CompletableFuture<Boolean> after = new CompletableFuture<>();
            d.execute(() -> after.complete(true));
            assertTrue(after.get(10, TimeUnit.SECONDS));
        }
    }
}
