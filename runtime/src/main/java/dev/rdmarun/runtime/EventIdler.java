package dev.rdmarun.runtime;

/**
 * EVENT mode: spins a few empty rounds, then arms the CQs and sleeps in poll(2) until a
 * completion, a task or an agent's deadline. Apart from the dispatcher because only this way of
 * waiting needs the CQs armed and events acknowledged, and a wake-up through the eventfd.
 */
final class EventIdler implements Idler {
    /** Empty rounds before the CQs are armed and the thread sleeps. */
    private static final int SPINS_BEFORE_SLEEP = 64;

    private final PollingDispatcher dispatcher;
    private final CompletionPoller poller;
    private final TaskQueue tasks;
    private final AgentList agents;
    private final PollSleeper sleeper;
    private CompletionChannel channel;
    private int emptyPolls;
    private volatile boolean sleeping;

    EventIdler(PollingDispatcher dispatcher, CompletionPoller poller, TaskQueue tasks, AgentList agents,
               PollSleeper sleeper) {
        this.dispatcher = dispatcher;
        this.poller = poller;
        this.tasks = tasks;
        this.agents = agents;
        this.sleeper = sleeper;
    }

    /** The channel every CQ uses (null: a dispatcher that only runs tasks); dispatcher thread only. */
    void useChannel(CompletionChannel channel) {
        this.channel = channel;
    }

    CompletionChannel channel() {
        return channel;
    }

    @Override
    public void idle(int work) throws Throwable {
        if (work > 0) {
            emptyPolls = 0;
        } else if (++emptyPolls >= SPINS_BEFORE_SLEEP) {
            sleepUntilEvent();
            emptyPolls = 0;
        } else {
            Thread.onSpinWait();
        }
    }

    @Override
    public void wake() {
        if (sleeping) sleeper.signal();
    }

    /**
     * Arms every CQ, polls once more (a completion that arrived before arming raises no event),
     * then sleeps in poll(2) on the channel and the wake-up fd.
     */
    private void sleepUntilEvent() throws Throwable {
        if (channel != null) {
            poller.arm();
            if (poller.poll() > 0) return;
        }
        sleeping = true;
        try {
            if (!tasks.isEmpty() || !dispatcher.isRunning()) return;
            sleeper.sleep(channel, agents.sleepMillis());
        } finally {
            sleeping = false;
        }
        sleeper.drain();
        if (channel != null) {
            CompletionQueue cq;
            while ((cq = channel.nextEvent()) != null) {
                // counted on the CQ; acknowledged below in one call per CQ
            }
            poller.acknowledgeEvents();
        }
    }
}
