package dev.rdmarun.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The dispatcher's task duty, on the test's thread: which tasks a round runs, and shutdown's drain. */
class TaskQueueTest {
    private final TaskQueue tasks = new TaskQueue();
    private int runs;

    @Test
    void aTaskThatRequeuesItselfRunsOncePerRound() {
        Runnable again = new Runnable() {
            @Override
            public void run() {
                runs++;
                tasks.addLocal(this);
            }
        };
        tasks.addLocal(again);
        tasks.addRemote(() -> runs += 10);
        assertEquals(2, tasks.run());
        assertEquals(11, runs);
        assertEquals(1, tasks.run());
        assertEquals(12, runs);
    }

    @Test
    void aFailingTaskGoesToTheThreadsHandlerAndTheRoundGoesOn() {
        List<Throwable> seen = new ArrayList<>();
        Thread thread = Thread.currentThread();
        Thread.UncaughtExceptionHandler before = thread.getUncaughtExceptionHandler();
        thread.setUncaughtExceptionHandler((t, e) -> seen.add(e));
        try {
            IllegalStateException boom = new IllegalStateException("boom");
            tasks.addLocal(() -> {
                throw boom;
            });
            tasks.addLocal(() -> runs++);
            assertEquals(2, tasks.run());
            assertEquals(List.of(boom), seen);
            assertEquals(1, runs);
        } finally {
            thread.setUncaughtExceptionHandler(before);
        }
    }

    @Test
    void drainRunsAFewRoundsThenDropsTheRest() {
        Runnable forever = new Runnable() {
            @Override
            public void run() {
                runs++;
                tasks.addLocal(this);
            }
        };
        tasks.addLocal(forever);
        tasks.drain();
        assertEquals(8, runs);
        assertTrue(tasks.isEmpty());
    }
}
