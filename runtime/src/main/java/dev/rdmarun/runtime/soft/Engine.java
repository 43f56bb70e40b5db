package dev.rdmarun.runtime.soft;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.jctools.queues.atomic.MpscAtomicArrayQueue;

/**
 * The "hardware" of one software context: what an RNIC does behind the verbs. It takes the
 * packets that arrive for the context's QPs (responder and requester side), sends what posted work
 * requests ask for (rung by {@link #ring}), and runs the QPs' timers (RNR back-off, ACK timeout).
 *
 * <p>Its state is owned by whichever thread holds the engine (a CAS on {@link #owner}, never
 * waited for). A post or an arriving packet does the engine's round at once in the calling
 * thread when the engine is free: a work request is on its way, and for a peer in this JVM already
 * at its receive queue and CQ, when the post returns, with no thread hop (two hops per message
 * through a sleeping engine thread made the in-memory round trip cost tens of microseconds). When
 * the engine is busy, the work is queued for its holder or for the engine's own thread, which
 * also runs the timers and whatever was left. Posting and polling never wait for the engine.
 */
final class Engine implements Runnable {
    private static final int INBOUND_CAPACITY = 1 << 14;
    private static final int SPINS_BEFORE_PARK = 200;
    private static final long MAX_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    /** Rounds a caller runs before it leaves the rest to the engine thread (a post stays short). */
    private static final int INLINE_ROUNDS = 8;
    private static final VarHandle OWNER;

    static {
        try {
            OWNER = MethodHandles.lookup().findVarHandle(Engine.class, "owner", Thread.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final SoftContext context;
    private final Thread thread;
    private final MpscAtomicArrayQueue<Packet> inbound = new MpscAtomicArrayQueue<>(INBOUND_CAPACITY);
    private final MpscAtomicArrayQueue<SoftQueuePair> doorbells = new MpscAtomicArrayQueue<>(SoftContext.MAX_QP);
    /** Packets whose link was busy, each with its link in {@link Packet#via}; sent first next round. */
    private final ArrayDeque<Packet> backlog = new ArrayDeque<>();
    /** QPs with a running timer; scanned each round (a context has few QPs with work in flight). */
    private final ArrayList<SoftQueuePair> timed = new ArrayList<>();
    /** The thread that holds the engine's state, or null. */
    @SuppressWarnings("unused") // through OWNER
    private volatile Thread owner;
    /** The earliest pending timer deadline the last round saw (0: none); read by the engine thread. */
    private long nextDeadline;
    private volatile boolean running = true;
    private volatile boolean sleeping;
    /** When the parked engine thread wakes on its own (0: not parked, or not known yet). */
    private volatile long parkUntil;
    /** The earliest timer started by a caller's round since the engine thread's last round (0: none). */
    private volatile long wakeBy;

    Engine(SoftContext context, String name) {
        this.context = context;
        this.thread = Thread.ofPlatform().name(name).daemon(true).unstarted(this);
    }

    void start() {
        thread.start();
    }

    boolean isEngineThread() {
        return Thread.currentThread() == thread;
    }

    /** A packet for this context; false when the inbound queue is full (the sender retries). */
    boolean deliver(Packet p) {
        if (!inbound.offer(p)) return false;
        kick();
        return true;
    }

    /** The QP has new work requests to send. Any thread; allocation-free. */
    void ring(SoftQueuePair qp) {
        if (qp.scheduled.compareAndSet(false, true)) {
            doorbells.offer(qp); // at most one entry per QP: the queue holds every QP the context may have
            kick();
        }
    }

    /** Sends over a link from the engine's holder; a busy link keeps the packet in the backlog, in order. */
    void send(Link link, Packet p) {
        if (backlog.isEmpty() && link.offer(p)) return;
        p.via = link;
        backlog.addLast(p);
    }

    /** Runs the QP's timers from now on; the first is due at {@code deadline} (engine's holder). */
    void timerStarted(SoftQueuePair qp, long deadline) {
        if (!timed.contains(qp)) timed.add(qp);
        if (isEngineThread()) return; // its next park accounts for it
        // Started in a caller's round: the engine thread may be parked past it. Wake it only then
        // (not for every message's ACK timer), or when its park time is not known yet.
        long by = wakeBy;
        if (by == 0 || deadline - by < 0) wakeBy = deadline;
        if (sleeping) {
            long until = parkUntil;
            if (until == 0 || deadline - until < 0) LockSupport.unpark(thread);
        }
    }

    /**
     * New work is queued: do it now in this thread if the engine is free, else leave it to the
     * holder (when that is this thread, its round is running and takes it) or the engine thread.
     */
    private void kick() {
        Thread me = Thread.currentThread();
        // Held by this thread: its round is running and takes the work. Held by another: every
        // holder looks at the queues again after it lets go (a caller below, the engine thread in
        // its idle loop), so the work is taken without waking anyone.
        if (owner == me || !OWNER.compareAndSet(this, null, me)) return;
        int rounds = 0;
        do {
            try {
                if (!running) return;
                while (round() > 0) {
                    if (++rounds >= INLINE_ROUNDS) {
                        wake();
                        return;
                    }
                }
            } finally {
                OWNER.setVolatile(this, null);
            }
            // A producer that found the engine held after our last round queued its work for us:
            // take it if the engine is still free (else its new holder or thread does).
        } while (hasWork() && OWNER.compareAndSet(this, null, me));
    }

    private boolean hasWork() {
        return !inbound.isEmpty() || !doorbells.isEmpty() || !backlog.isEmpty();
    }

    private void wake() {
        if (sleeping) LockSupport.unpark(thread);
    }

    /**
     * One round of the engine's work (its holder only); returns how much it did. Only the engine
     * thread runs the timers: a caller's round stays the message's own work, and every timer
     * started in one wakes the engine thread when due ({@link #timerStarted}).
     */
    private int round() {
        int work = flushBacklog() + handleInbound() + transmit();
        if (isEngineThread()) nextDeadline = runTimers();
        return work;
    }

    @Override
    public void run() {
        int idle = 0;
        while (running) {
            int work = 0;
            long deadline = 0;
            wakeBy = 0; // a round sees every timer in `timed`
            if (OWNER.compareAndSet(this, null, thread)) {
                try {
                    work = round();
                    deadline = nextDeadline;
                } finally {
                    OWNER.setVolatile(this, null);
                }
            }
            if (work > 0) {
                idle = 0;
                continue;
            }
            if (++idle < SPINS_BEFORE_PARK) {
                Thread.onSpinWait();
                continue;
            }
            sleeping = true;
            // Re-check after announcing the sleep: a producer that saw sleeping == false did not unpark.
            if (inbound.isEmpty() && doorbells.isEmpty() && running) {
                long now = System.nanoTime();
                long by = wakeBy;
                if (by != 0 && (deadline == 0 || by - deadline < 0)) deadline = by;
                long park = deadline == 0 ? MAX_PARK_NANOS : Math.min(MAX_PARK_NANOS, Math.max(0, deadline - now));
                parkUntil = now + park;
                if (park > 0) LockSupport.parkNanos(this, park);
                parkUntil = 0;
            }
            sleeping = false;
            idle = 0;
        }
        // Stopped: once no caller holds the engine, return what is still queued to its pools.
        while (!OWNER.compareAndSet(this, null, thread)) Thread.onSpinWait();
        Packet p;
        while ((p = inbound.poll()) != null) p.release();
        while ((p = backlog.pollFirst()) != null) p.release();
    }

    private int flushBacklog() {
        int n = 0;
        Packet p;
        while ((p = backlog.peekFirst()) != null) {
            Link via = p.via;
            p.via = null;
            if (!via.offer(p)) {
                p.via = via;
                break;
            }
            backlog.pollFirst();
            n++;
        }
        return n;
    }

    private int handleInbound() {
        int n = 0;
        Packet p;
        // Bounded per round, so doorbells and timers get their turn under a flood of packets.
        while (n < 256 && (p = inbound.poll()) != null) {
            n++;
            context.handle(p);
        }
        return n;
    }

    private int transmit() {
        int n = 0;
        SoftQueuePair qp;
        while ((qp = doorbells.poll()) != null) {
            qp.scheduled.set(false);
            try {
                qp.transmit();
            } catch (RuntimeException e) {
                // A region closed under a work request (its lkey then names nothing): the QP's
                // next transmit reports it; the engine itself keeps running for the other QPs.
            }
            n++;
        }
        return n;
    }

    /** Fires due timers; returns the earliest deadline still pending, or 0 when none is. */
    private long runTimers() {
        if (timed.isEmpty()) return 0;
        long now = System.nanoTime();
        long next = 0;
        for (int i = timed.size() - 1; i >= 0; i--) {
            SoftQueuePair qp = timed.get(i);
            long deadline;
            try {
                deadline = qp.runTimer(now);
            } catch (RuntimeException e) {
                deadline = 0; // as in transmit(): one QP's failure must not stop the engine
            }
            if (deadline == 0) {
                timed.remove(i);
            } else if (next == 0 || deadline - next < 0) {
                next = deadline;
            }
        }
        return next;
    }

    /** Stops the thread and waits for it (bounded). */
    void stop() {
        running = false;
        LockSupport.unpark(thread);
        if (isEngineThread()) return;
        try {
            thread.join(TimeUnit.SECONDS.toMillis(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
